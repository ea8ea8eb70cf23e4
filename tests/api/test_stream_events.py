"""Every kind of event the server sends on its Server-Sent Event streams matches
components/schemas/StreamEvent of docs/openapi.json, and the check bites: an event with a
required field dropped or an unknown field added fails it (tests/api/stream_check.py, which
helpers.SSEStream runs on every event any test receives)."""
import copy
import time
import uuid

import pytest
import requests

from chat_fixtures import Chat
from helpers import SSEStream, sign_up
from ment_fixtures import make_session
from stream_check import branch, validate

HEART = "\u2764\ufe0f"


def upload(client, data, filename, mime="text/plain"):
    """presign + PUT + register; returns the file id."""
    p = client.post_json("/api/files/presign", {"filename": filename, "mimeType": mime,
                                                "sizeBytes": len(data)})["data"]
    assert requests.put(p["presignedUrl"], data=data, headers=p["uploadHeaders"]).ok
    return client.post_json("/api/files/register", {
        "storageKey": p["storageKey"], "filename": filename, "mimeType": mime,
        "sizeBytes": len(data)}, expect=201)["data"]["fileId"]


@pytest.fixture(scope="module")
def events():
    """One event of every kind the product publishes, as the coach's user stream and the
    teacher's mentorship stream received them: {event name: [received events]}."""
    chat = Chat()
    coach, teacher = chat.c("Coach"), chat.c("Teacher")
    fid = upload(coach, b"attached", filename="Notes \u00e9t\u00e9.txt")
    mpath = "/api/events/mentorships/%s/events" % chat.id
    got = {}
    with SSEStream(teacher, mpath) as ms, SSEStream(coach, "/api/events/users/me/events") as us:
        assert ms.status == 200 and us.status == 200
        time.sleep(0.3)
        first = chat.post("Teacher", "first")
        msg = chat.post("Coach", "hello", clientMessageId=str(uuid.uuid4()),
                        replyToMessageId=first["id"], attachmentIds=[fid])
        base = chat.msgs("/%s" % msg["id"])
        coach.patch_json(base, {"body": "hello again"})
        teacher.post_json(base + "/reactions", {"emoji": "\U0001F44D"})
        teacher.delete_json(base + "/reactions/%F0%9F%91%8D")
        coach.delete_json(base, expect=204)
        session = make_session(chat.org, chat.id)["data"]
        teacher.post_json("/api/sessions/%s/reactions" % session["id"], {"emoji": HEART})
        names = ["chat-message", "chat-message", "chat-message-updated", "chat-reaction-added",
                 "chat-reaction-removed", "chat-message-deleted", "session-update",
                 "call-reaction"]
        for name in names:
            got.setdefault(name, []).append(ms.next(name))
        for name in names[:-1]:  # call reactions go to the mentorship stream only
            us.next(name)
    # A resume from an id the history cannot serve gets a reset.
    with SSEStream(teacher, mpath, headers={"Last-Event-ID": "99999999999999-0"}) as rs:
        got["reset"] = [rs.next("reset")]
    return got


def test_every_event_matches_the_document(events):
    # Checked already as they arrived (SSEStream.next); once more here, by name.
    for name, evs in events.items():
        for ev in evs:
            validate(name, ev["data"], ev["id"])
    msg = events["chat-message"][1]["data"]
    assert msg["replyTo"]["body"] == "first" and msg["attachments"][0]["url"]
    assert events["call-reaction"][0]["data"]["emoji"] == HEART
    assert events["reset"][0]["data"] == {"reason": "unknown-id"}


def test_ping_matches_the_document():
    validate("ping", "", "1764000000000-0")
    validate("ping", "")  # no position yet: no id
    with pytest.raises(AssertionError):
        validate("ping", {"n": 1}, "1764000000000-0")


def mutations(data, schema, path=()):
    """(description, mutated data): each required member dropped and an unknown member added,
    for the data object and every object nested in it that the schema closes."""
    from openapi_check import DOC
    while "$ref" in schema:
        schema = DOC["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if "oneOf" in schema and isinstance(data, dict):
        schema = next(s for s in schema["oneOf"] if s.get("type") == "object" or "$ref" in s)
        yield from mutations(data, schema, path)
        return
    if not isinstance(data, dict) or schema.get("additionalProperties") is not False:
        return
    for key in schema.get("required", []):
        d = {k: v for k, v in data.items() if k != key}
        yield "drop %s" % "/".join(path + (key,)), d
    yield "add %s" % "/".join(path + ("unknownField",)), dict(data, unknownField=1)
    for key, sub in schema["properties"].items():
        value = data.get(key)
        items = value if isinstance(value, list) else [value]
        sub_schema = sub.get("items", sub) if isinstance(value, list) else sub
        for i, item in enumerate(items[:1]):
            for what, mutated in mutations(item, sub_schema, path + (key,)):
                d = copy.deepcopy(data)
                if isinstance(value, list):
                    d[key][i] = mutated
                else:
                    d[key] = mutated
                yield what, d


def test_a_drifted_event_fails(events):
    caught = 0
    for name, evs in events.items():
        ev = evs[-1]
        schema = branch(name)["properties"]["data"]
        cases = list(mutations(ev["data"], schema))
        assert cases, name
        for what, data in cases:
            with pytest.raises(AssertionError):
                validate(name, data, ev["id"])
            caught += 1
        with pytest.raises(AssertionError):  # an event type the document does not know
            validate(name + "-x", ev["data"], ev["id"])
    print("stream events: %d drifted shapes caught" % caught)
    assert caught >= 60, caught


def test_injected_events_are_not_the_servers():
    """Events a test publishes itself (publish_event) are left alone: their data is the test's."""
    from helpers import publish_event
    c, u = sign_up()
    with SSEStream(c, "/api/events/users/me/events") as s:
        time.sleep(0.3)
        publish_event("user:%s" % u["id"], "chat-message", {"n": 1})
        assert s.next("chat-message")["data"] == {"n": 1}
