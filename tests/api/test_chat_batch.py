"""Concurrent posts of one mentorship go to PostgreSQL in batches (routes/chat.c): each post of
a batch keeps its own body, sender, reply target, clientMessageId, answer, push and event, and
createdAt stays unique and a gap-free cursor."""
import concurrent.futures
import threading
import time
import uuid

import pytest

from chat_fixtures import Chat
from helpers import RedisSub, psql, psql_value, redis_cli
from ment_fixtures import add_push_token

ODD = ['say "hi"', "back\\slash", "{braces},commas", "NULL", "'quote'", "ñ😀 \\\"both\\\""]


@pytest.fixture
def chat():
    return Chat()


def test_burst_keeps_every_post_apart(chat, push):
    parent = chat.post("Coach", "parent")
    tok = add_push_token(chat.uid("Coach"))
    keys = ("Teacher", "Manager", "OrganizationAdmin")

    def send(i):
        key = keys[i % 3]
        fields = {"body": "%s %d" % (ODD[i % len(ODD)], i), "clientMessageId": str(uuid.uuid4())}
        if i % 4 == 0:
            fields["replyToMessageId"] = parent["id"]
        r = chat.c(key).post(chat.msgs(), json=fields)
        return key, fields, r.status_code, r.json()["data"]

    with RedisSub("mentorship:%s" % chat.id) as sub:
        with concurrent.futures.ThreadPoolExecutor(24) as ex:
            got = list(ex.map(send, range(48)))
        events = [sub.next("chat-message")["data"] for _ in range(48)]
    for key, fields, status, m in got:
        assert status == 201
        assert m["body"] == fields["body"] and m["senderId"] == chat.uid(key)
        assert m["clientMessageId"] == fields["clientMessageId"]
        assert m["replyToMessageId"] == fields.get("replyToMessageId")
        if "replyToMessageId" in fields:
            assert m["replyTo"]["body"] == "parent"
        assert m["sender"]["id"] == chat.uid(key)
    # The answers of a batch are written in C; the same message sent again with its
    # clientMessageId is answered from the stored row, rendered by PostgreSQL
    # (chat_message_json): the two must agree field by field, and the event is the answer.
    by_id = {e["id"]: e for e in events}
    for key, fields, _, m in got:
        again = chat.c(key).post(chat.msgs(), json=fields)
        assert again.status_code == 200
        assert again.json()["data"] == m
        assert by_id[m["id"]] == m
    assert sorted(e["id"] for e in events) == sorted(m["id"] for *_, m in got)
    # Every post pushed to the coach (the only one with a token; the coach did not post), with
    # its own sender's name as title and its own body.
    push.wait_for(tok, count=48)
    pushed = sorted((m["title"], m["body"]) for m in push.messages()
                    if isinstance(m, dict) and tok in (m.get("to") or []))
    assert pushed == sorted(("%s %s" % (m["sender"]["firstName"], m["sender"]["lastName"]),
                             f["body"]) for _, f, _, m in got)
    # Unique times, and the walk by cursor sees every message once.
    times = [m["createdAt"] for *_, m in got]
    assert len(set(times)) == 48
    seen, cursor = [], None
    while True:
        q = {"limit": 7}
        if cursor:
            q["before"] = cursor
        page = chat.history("Coach", **q)
        seen += [x["id"] for x in page["data"]]
        cursor = page["meta"]["nextCursor"]
        if not page["meta"]["hasMore"]:
            break
    assert len(seen) == len(set(seen)) == 49
    assert psql_value("SELECT count(DISTINCT created_at) FROM chat_messages"
                      " WHERE mentorship_id = :'m'", m=chat.id) == "49"


def test_burst_of_access_reads_answers_each_post_on_its_own(chat):
    """Posts that arrive together read their mentorship's access in one statement per
    mentorship (routes/chat.c "access reads of posts, grouped"): in one burst, each post still
    gets its own answer: 201, the stored message again for a repeated clientMessageId, 422 for a
    reply target of another mentorship, 403 for a caller outside the mentorship, 404 for a
    mentorship that does not exist."""
    other = Chat()
    foreign = other.post("Coach", "in another mentorship")
    seen_id = str(uuid.uuid4())
    seen = chat.post("Teacher", "posted before", clientMessageId=seen_id)
    missing = str(uuid.uuid4())

    def send(i):
        kind = i % 5
        key, path, fields = "Teacher", chat.msgs(), {"body": "burst %d" % i}
        if kind == 1:
            fields["clientMessageId"] = seen_id
            fields["body"] = "posted before"
        elif kind == 2:
            fields["replyToMessageId"] = foreign["id"]
        elif kind == 3:
            key = "Coach2"
        elif kind == 4:
            path = chat.msgs(mid=missing)
        r = chat.c(key).post(path, json=fields)
        return kind, r.status_code, r.json()

    with concurrent.futures.ThreadPoolExecutor(25) as ex:
        got = list(ex.map(send, range(50)))
    want = {0: 201, 1: 200, 2: 422, 3: 403, 4: 404}
    for kind, status, body in got:
        assert status == want[kind], (kind, status, body)
        if kind == 0:
            assert body["data"]["body"].startswith("burst ")
        if kind == 1:
            assert body["data"] == seen
    assert psql_value("SELECT count(*) FROM chat_messages WHERE mentorship_id = :'m'"
                      " AND body LIKE 'burst %%'", m=chat.id) == "10"


def eval_calls():
    """How many EVAL calls Redis has run so far."""
    for line in redis_cli("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_eval:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def id_key(event_id):
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


def test_burst_events_reach_every_channel_once_in_order(chat):
    """The events of a batch go to Redis in one script call (rt/events.h): each post's event
    still reaches the mentorship's channel and the user channels of the coach, the teacher and
    the organization's administrators once, each channel's ids increase, and each channel's
    history holds the same events under the same ids, in the same order."""
    users = [chat.uid(k) for k in ("Coach", "Teacher", "OrganizationAdmin", "Manager")]
    chans = ["mentorship:%s" % chat.id] + ["user:%s" % u for u in users]
    # The mentorship's clock row is held for a while, so the first posts wait for it inside
    # PostgreSQL and the others gather in the lane: batches form however fast the client is.
    holder = threading.Thread(target=psql, args=(
        "BEGIN; INSERT INTO chat_clocks VALUES (:'m', now()) ON CONFLICT (mentorship_id)"
        " DO UPDATE SET last_at = chat_clocks.last_at; SELECT pg_sleep(1.5); COMMIT;",),
        kwargs={"m": chat.id})
    before = eval_calls()
    holder.start()
    deadline = time.monotonic() + 10
    while psql_value("SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                     " AND query LIKE '%pg_sleep(1.5)%' AND pid <> pg_backend_pid()") != "1":
        assert time.monotonic() < deadline, "the clock row was not taken"
        time.sleep(0.02)
    with RedisSub(*chans) as sub:
        with concurrent.futures.ThreadPoolExecutor(24) as ex:
            posted = list(ex.map(lambda i: chat.post(("Teacher", "Coach")[i % 2], "burst %d" % i),
                                 range(48)))
        holder.join()
        got = {c: [] for c in chans}
        for _ in range(48 * len(chans)):
            m = sub.next("chat-message")
            got[m["channel"]].append(m)
        assert sub.drain(0.5) == []  # nothing twice
    # 24 posts wait behind the held row: two alone in flight, 22 in one batch; the next 24
    # arrive as those are answered, so the calls are at most 3 + 24.
    assert eval_calls() - before <= 27
    ids = sorted(p["id"] for p in posted)
    for chan, evs in got.items():
        assert sorted(e["data"]["id"] for e in evs) == ids, chan
        keys = [id_key(e["id"]) for e in evs]
        assert keys == sorted(keys) and len(set(keys)) == 48, chan
        # XRANGE prints each entry as three lines: its id, the field name, the message.
        stored = redis_cli("XRANGE", "events:" + chan, "-", "+").splitlines()[0::3]
        assert stored[-48:] == [e["id"] for e in evs], chan
