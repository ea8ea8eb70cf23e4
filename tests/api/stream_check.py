"""Validates the events of the Server-Sent Event streams against components/schemas/StreamEvent
of docs/openapi.json (the DOC that openapi_check.py loads), so an event whose shape drifts from
the document fails the test that receives it. helpers.SSEStream.next() checks every event it
hands out or skips.

An event has the shape the stream sends: {"id"?, "event", "data"}, data parsed as JSON when it
parses (ping's data is empty text). Events a test injected into Redis itself (publish_event, or
a raw PUBLISH the test names with injected()) are not the server's and are not checked."""
import jsonschema

from openapi_check import DOC

INJECTED = set()  # ids of events a test published itself
CHECKED = {"events": 0, "types": set()}


def injected(event_id):
    """Marks an event id as published by the test, not by the server."""
    INJECTED.add(event_id)
    return event_id


def _schema(ref):
    return {"$ref": ref, "components": DOC["components"]}


def branch(name):
    """The StreamEvent alternative of the event type `name` (None when the document has none)."""
    for alt in DOC["components"]["schemas"]["StreamEvent"]["oneOf"]:
        if alt.get("properties", {}).get("event", {}).get("const") == name:
            return alt
    return None


def validate(name, data, event_id=None):
    """Raises AssertionError unless {"id", "event", "data"} is a StreamEvent (formats included)."""
    item = {"event": name, "data": data}
    if event_id is not None:
        item["id"] = event_id
    alt = branch(name)
    if alt is None:
        raise AssertionError("SSE event %r is not described by StreamEvent" % name)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for schema in ({**alt, "components": DOC["components"]},
                   _schema("#/components/schemas/StreamEvent")):
        try:
            jsonschema.validate(item, schema, cls=jsonschema.Draft202012Validator,
                                format_checker=checker)
        except jsonschema.ValidationError as e:
            where = "/".join(str(p) for p in e.absolute_path)
            raise AssertionError("SSE event %s does not match StreamEvent at %s: %s (data: %r)"
                                 % (name, where or "(root)", e.message, data)) from None


def check(ev):
    """Checks one event as helpers.SSEStream reads it, unless the test injected it."""
    if ev.get("id") is not None and ev["id"] in INJECTED:
        return
    validate(ev["event"], ev["data"], ev.get("id"))
    CHECKED["events"] += 1
    CHECKED["types"].add(ev["event"])
