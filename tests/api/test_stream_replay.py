"""Resumable streams (docs/api.md "Event ids, replay and reset"): every event's id is its entry
in the channel's Redis history; a reconnect with Last-Event-ID (or ?lastEventId=) gets what it
missed, in order and once, before live events, from any worker or host; an id the history cannot
serve gets one `reset` event."""
import concurrent.futures
import time
import uuid

import pytest

from chat_fixtures import Chat
from helpers import RedisSub, SSEStream, psql, redis_cli, second_coachd, free_port
from stream_check import injected


@pytest.fixture(scope="module")
def chat():
    return Chat()


def mpath(chat):
    return "/api/events/mentorships/%s/events" % chat.id


UPATH = "/api/events/users/me/events"


def opened(stream):
    """Gives the new stream time to subscribe and read its position: a stream opened without
    Last-Event-ID starts at the events published after that."""
    assert stream.status == 200
    time.sleep(0.3)
    return stream


def bodies(stream, n, event="chat-message"):
    """The next n events named `event`: [(id, body)]."""
    out = []
    for _ in range(n):
        ev = stream.next(event)
        out.append((ev["id"], ev["data"]["body"]))
    return out


def id_key(event_id):
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


@pytest.mark.parametrize("which", ["mentorship", "user"])
def test_reconnect_replays_missed_events_in_order_once(chat, which):
    teacher = chat.c("Teacher")
    path = mpath(chat) if which == "mentorship" else UPATH
    with opened(SSEStream(teacher, path)) as s:
        first = chat.post("Coach", "seen %s" % which)
        ev = s.next("chat-message")
        assert ev["data"]["id"] == first["id"]
        last_id = ev["id"]
    missed = [chat.post("Coach", "missed %s %d" % (which, i))["body"] for i in range(5)]
    with SSEStream(teacher, path, headers={"Last-Event-ID": last_id}) as s:
        got = bodies(s, 5)
        assert [b for _, b in got] == missed
        ids = [i for i, _ in got]
        assert ids == sorted(ids, key=id_key) and len(set(ids)) == 5
        assert id_key(ids[0]) > id_key(last_id)
        live = chat.post("Coach", "live %s" % which)
        ev = s.next("chat-message")
        assert ev["data"]["id"] == live["id"]
        s.no_event("chat-message", wait=0.7)  # nothing twice
        s.no_event("reset", wait=0.1)


def test_query_parameter_resumes_too(chat):
    """A browser EventSource opened anew cannot set headers: ?lastEventId= does the same."""
    teacher = chat.c("Teacher")
    with opened(SSEStream(teacher, mpath(chat))) as s:
        chat.post("Coach", "q seen")
        last_id = s.next("chat-message")["id"]
    chat.post("Coach", "q missed")
    with SSEStream(teacher, mpath(chat) + "?lastEventId=" + last_id) as s:
        assert s.next("chat-message")["data"]["body"] == "q missed"
        s.no_event("chat-message", wait=0.5)


def test_ping_id_resumes_without_duplicates(chat):
    """A reconnect with the id of the stream's newest event (what a ping carries) replays
    nothing."""
    teacher = chat.c("Teacher")
    with opened(SSEStream(teacher, mpath(chat))) as s:
        chat.post("Coach", "newest")
        last_id = s.next("chat-message")["id"]
    with opened(SSEStream(teacher, mpath(chat), headers={"Last-Event-ID": last_id})) as s:
        s.no_event(wait=0.7)
        chat.post("Coach", "after")
        assert s.next("chat-message")["data"]["body"] == "after"


@pytest.fixture(scope="module")
def two_workers():
    with second_coachd(WORKERS=2) as base:
        yield base


def test_replay_across_processes_and_workers(chat, two_workers):
    """Events published by one coachd are replayed by another (any of its two workers)."""
    teacher = chat.c("Teacher")
    with opened(SSEStream(teacher, mpath(chat))) as s:
        chat.post("Coach", "x seen")
        last_id = s.next("chat-message")["id"]
    missed = [chat.post("Coach", "x missed %d" % i)["body"] for i in range(3)]
    workers = set()
    streams = []
    try:
        for _ in range(8):
            s = SSEStream(type(teacher)(base_url=two_workers), mpath(chat),
                          cookies={"auth.session_token": teacher.session_token},
                          headers={"Last-Event-ID": last_id})
            streams.append(s)
            workers.add(s.response.headers["X-Request-Id"][:8])
        assert len(workers) == 2, "SO_REUSEPORT should spread 8 connections over both workers"
        for s in streams:
            assert [b for _, b in bodies(s, 3)] == missed
        more = chat.post("Coach", "x live")
        for s in streams:
            assert s.next("chat-message")["data"]["id"] == more["id"]
            s.no_event("chat-message", wait=0.2)
    finally:
        for s in streams:
            s.close()


def test_unusable_ids_get_a_reset(chat):
    teacher = chat.c("Teacher")
    chat.post("Coach", "something to have a history")
    newest = redis_cli("XREVRANGE", "events:mentorship:%s" % chat.id, "+", "-", "COUNT", "1")
    newest = newest.split()[0]
    for bad, reason in (("garbage", "unknown-id"), ("1-2-3", "unknown-id"),
                        ("99999999999999-0", "unknown-id")):
        with SSEStream(teacher, mpath(chat), headers={"Last-Event-ID": bad}) as s:
            ev = s.next("reset")
            assert ev["data"] == {"reason": reason}
            assert ev["id"] == newest  # resume from here next time
            s.no_event("chat-message", wait=0.3)
            # Live events follow the reset.
            time.sleep(0.2)
            m = chat.post("Coach", "after reset %s" % bad)
            assert s.next("chat-message")["data"]["id"] == m["id"]
        newest = redis_cli("XREVRANGE", "events:mentorship:%s" % chat.id, "+", "-",
                           "COUNT", "1").split()[0]


def test_id_older_than_the_history_gets_a_reset():
    """EVENT_HISTORY_SECONDS=1 on the publishing server: events more than a second older than
    the channel's newest are trimmed, and a client that missed one is told to refetch."""
    chat = Chat()
    teacher = chat.c("Teacher")
    with second_coachd(EVENT_HISTORY_SECONDS=1) as base:
        coach = chat.c("Coach")
        coach.base_url = base
        with opened(SSEStream(teacher, mpath(chat))) as s:
            coach.post_json(chat.msgs(), {"body": "old 1"}, expect=201)
            last_id = s.next("chat-message")["id"]
        coach.post_json(chat.msgs(), {"body": "old 2 (missed, then trimmed)"}, expect=201)
        time.sleep(1.3)
        coach.post_json(chat.msgs(), {"body": "new"}, expect=201)
        coach.base_url = chat.c("Manager").base_url
    key = "events:mentorship:%s" % chat.id
    assert redis_cli("XLEN", key) == "1"  # only "new" is left
    with SSEStream(teacher, mpath(chat), headers={"Last-Event-ID": last_id}) as s:
        ev = s.next("reset")
        assert ev["data"] == {"reason": "too-old"}
        assert ev["id"] == redis_cli("XREVRANGE", key, "+", "-", "COUNT", "1").split()[0]
        s.no_event("chat-message", wait=0.5)


def test_burst_trims_the_history_to_its_count():
    """EVENT_HISTORY_MAX=5 on the publishing server, and posts in bursts, so one script call
    carries the events of several posts: once a channel holds more than 105 events it is cut
    back to the newest 5 (after all of a call's events), the cut becomes the stream's
    max-deleted-entry-id, and a client that missed a trimmed event is told to refetch."""
    chat = Chat()
    teacher = chat.c("Teacher")
    key = "events:mentorship:%s" % chat.id
    with second_coachd(EVENT_HISTORY_MAX=5) as base:
        coach = chat.c("Coach")
        coach.base_url = base
        try:
            with opened(SSEStream(teacher, mpath(chat))) as s:
                coach.post_json(chat.msgs(), {"body": "first"}, expect=201)
                first_id = s.next("chat-message")["id"]
            with concurrent.futures.ThreadPoolExecutor(16) as ex:
                list(ex.map(lambda i: coach.post_json(chat.msgs(), {"body": "b %d" % i},
                                                      expect=201), range(120)))
        finally:
            coach.base_url = chat.c("Manager").base_url
    n = int(redis_cli("XLEN", key))
    assert 5 <= n <= 105
    info = redis_cli("XINFO", "STREAM", key).splitlines()
    max_deleted = info[info.index("max-deleted-entry-id") + 1]
    oldest = redis_cli("XRANGE", key, "-", "+", "COUNT", "1").splitlines()[0]
    # Every entry after the cut is kept (the count cut is the oldest entry kept).
    assert id_key(first_id) <= id_key(max_deleted) <= id_key(oldest)
    with SSEStream(teacher, mpath(chat), headers={"Last-Event-ID": first_id}) as s:
        assert s.next("reset")["data"] == {"reason": "too-old"}


def test_event_has_one_id_on_every_channel():
    """An event takes one id on every channel it goes to (rt/events.c), also when it goes to
    many: here the organization has 63 administrators, so each post's event goes to the
    mentorship and 65 user channels, and the script runs past the end of a millisecond often.
    Before, each channel's XADD chose its own id, and the administrators were published in
    separate events of at most 64 channels."""
    chat = Chat()
    tag = uuid.uuid4().hex[:10]
    # Ids in the CUID form the API answers ('c' and 24 lower-case base-36 characters).
    psql("INSERT INTO users (id, email, first_name, last_name)"
         " SELECT 'cevid' || :'t' || lpad(i::text, 10, '0'), 'evid' || :'t' || i || '@example.com',"
         " 'Admin', i::text FROM generate_series(1, 61) i", t=tag)
    psql("INSERT INTO organization_memberships (organization_id, user_id,"
         " role_in_organization, membership_status)"
         " SELECT :'o', 'cevid' || :'t' || lpad(i::text, 10, '0'), 'Manager', 'active'"
         " FROM generate_series(1, 61) i",
         o=chat.org.id, t=tag)
    users = [chat.uid(k) for k in ("Coach", "Teacher", "OrganizationAdmin", "Manager")]
    users += ["cevid%s%010d" % (tag, i) for i in range(1, 62)]
    chans = ["mentorship:%s" % chat.id] + ["user:%s" % u for u in users]
    with RedisSub(*chans) as sub:
        posted = [chat.post("Coach", "one id %d" % i)["id"] for i in range(5)]
        got = [sub.next("chat-message") for _ in range(5 * len(chans))]
        assert sub.drain(0.3) == []
    for mid in posted:
        evs = [e for e in got if e["data"]["id"] == mid]
        assert sorted(e["channel"] for e in evs) == sorted(chans)
        assert len({e["id"] for e in evs}) == 1, mid


def test_redis_unavailable_gets_a_reset(chat):
    """A coachd whose Redis is down cannot replay: a resuming client gets `reset`."""
    teacher = chat.c("Teacher")
    dead = "redis://127.0.0.1:%d/0" % free_port()
    with second_coachd(REDIS_URL=dead) as base:
        s = SSEStream(type(teacher)(base_url=base), mpath(chat),
                      cookies={"auth.session_token": teacher.session_token},
                      headers={"Last-Event-ID": "1-0"})
        try:
            assert s.status == 200
            assert s.next("reset")["data"] == {"reason": "unavailable"}
        finally:
            s.close()


def test_open_stream_catches_up_after_the_subscriber_connection_drops(chat):
    """Events published while coachd's Redis subscriber connection is down (it reconnects after
    100 ms) reach the open stream afterwards, from the history, in order and once."""
    teacher = chat.c("Teacher")
    with opened(SSEStream(teacher, mpath(chat))) as s:
        chat.post("Coach", "before the drop")
        s.next("chat-message")
        assert int(redis_cli("CLIENT", "KILL", "TYPE", "pubsub")) >= 1
        sent = [chat.post("Coach", "during the drop %d" % i)["body"] for i in range(3)]
        assert [b for _, b in bodies(s, 3)] == sent
        later = chat.post("Coach", "after the drop")
        assert s.next("chat-message")["data"]["id"] == later["id"]
        s.no_event("chat-message", wait=0.7)
        s.no_event("reset", wait=0.1)


def test_events_without_a_history_id_pass_live(chat):
    """An event published by a coachd without history (rolling upgrade) has an id of the old
    form: the stream passes it live, and it does not move the position."""
    teacher = chat.c("Teacher")
    with opened(SSEStream(teacher, mpath(chat))) as s:
        chat.post("Coach", "with history")
        pos = s.next("chat-message")["id"]
        msg = '{"id":"%s","event":"chat-message","data":{"body":"old host"}}' % injected(
            "1795553511299-1a2b-7")
        assert int(redis_cli("PUBLISH", "mentorship:%s" % chat.id, msg)) >= 1
        ev = s.next("chat-message")
        assert ev["data"] == {"body": "old host"} and ev["id"] == "1795553511299-1a2b-7"
        later = chat.post("Coach", "with history again")
        ev = s.next("chat-message")
        assert ev["data"]["id"] == later["id"] and id_key(ev["id"]) > id_key(pos)
