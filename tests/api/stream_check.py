"""Validates the events of the Server-Sent Event streams against components/schemas/StreamEvent
of docs/openapi.json (the DOC that openapi_check.py loads), so an event whose shape drifts from
the document fails the test that receives it. helpers.SSEStream.next() checks every event it
hands out or skips.

An event has the shape the stream sends: {"id"?, "event", "data"}, data parsed as JSON when it
parses (ping's data is empty text). Events a test injected into Redis itself (publish_event, or
a raw PUBLISH the test names with injected()) are not the server's and are not checked."""
import openapi_check
from openapi_check import DOC

INJECTED = set()  # ids of events a test published itself
CHECKED = {"events": 0, "types": set()}
STREAM_EVENT = {"$ref": "#/components/schemas/StreamEvent"}


def injected(event_id):
    """Marks an event id as published by the test, not by the server."""
    INJECTED.add(event_id)
    return event_id


def branch(name):
    """The StreamEvent alternative of the event type `name` (None when the document has none)."""
    for alt in DOC["components"]["schemas"]["StreamEvent"]["oneOf"]:
        if alt.get("properties", {}).get("event", {}).get("const") == name:
            return alt
    return None


def validate(name, data, event_id=None):
    """Raises AssertionError unless {"id", "event", "data"} is a StreamEvent, formats included
    (openapi_check's validators): against the alternative of its type first, for a message that
    names the field, then against StreamEvent itself."""
    item = {"event": name, "data": data}
    if event_id is not None:
        item["id"] = event_id
    alt = branch(name)
    if alt is None:
        raise AssertionError("SSE event %r is not described by StreamEvent" % name)
    for schema in (alt, STREAM_EVENT):
        try:
            openapi_check.validate(schema, item, "SSE event %s" % name)
        except AssertionError as e:
            raise AssertionError("%s (data: %r)" % (e, data)) from None


def check(ev):
    """Checks one event as helpers.SSEStream reads it, unless the test injected it."""
    if ev.get("id") is not None and ev["id"] in INJECTED:
        return
    validate(ev["event"], ev["data"], ev.get("id"))
    CHECKED["events"] += 1
    CHECKED["types"].add(ev["event"])
