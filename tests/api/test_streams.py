"""Server-Sent Event streams: headers, framing, delivery through Redis, closing rules, and
fan-out across workers (docs/api.md "Event streams")."""
import contextlib
import socket
import time

import pytest

from helpers import (Client, SSEStream, assert_error, psql, publish_event, redis_cli,
                     second_coachd, sign_up)


def publish(channel, event, data):
    return publish_event(channel, event, data)


def raw_stream_head(client, path):
    """Reads the first bytes of a stream with a raw socket, to check the exact framing."""
    url = client.base_url.replace("http://", "")
    host, port = url.split(":")
    s = socket.create_connection((host, int(port)), timeout=5)
    cookie = "auth.session_token=%s" % client.session_token
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nCookie: %s\r\n\r\n" % (path, cookie)).encode())
    data = b""
    while b"retry: 3000\n\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return s, data.decode()


def test_user_stream_headers_and_first_frame():
    c, _ = sign_up()
    s, head = raw_stream_head(c, "/api/events/users/me/events")
    try:
        status, _, rest = head.partition("\r\n")
        assert status == "HTTP/1.1 200 OK"
        headers, _, body = rest.partition("\r\n\r\n")
        hl = headers.lower()
        assert "content-type: text/event-stream" in hl
        assert "cache-control: no-cache" in hl
        assert "x-accel-buffering: no" in hl
        assert "content-length" not in hl
        assert body == "retry: 3000\n\n"
    finally:
        s.close()


def test_user_stream_needs_session():
    assert_error(Client().get("/api/events/users/me/events"), 401, "UNAUTHENTICATED")


def test_user_stream_delivers_its_events_only():
    a, ua = sign_up()
    b, ub = sign_up()
    with SSEStream(a, "/api/events/users/me/events") as sa, \
            SSEStream(b, "/api/events/users/me/events") as sb:
        assert sa.status == 200 and sb.status == 200
        time.sleep(0.2)
        eid = publish("user:%s" % ua["id"], "chat-message", {"id": "m1", "body": "hi"})
        ev = sa.next("chat-message")
        assert ev["data"] == {"id": "m1", "body": "hi"} and ev["id"] == eid
        sb.no_event("chat-message", wait=0.5)


@contextlib.contextmanager
def user_streams(n):
    """n user streams of a new user, open and listening: (its channel, the streams)."""
    c, u = sign_up()
    streams = [SSEStream(c, "/api/events/users/me/events") for _ in range(n)]
    try:
        assert all(s.status == 200 for s in streams)
        time.sleep(0.3)
        yield "user:%s" % u["id"], streams
    finally:
        for s in streams:
            s.close()


def test_one_channel_many_streams_get_every_event_once_in_order():
    """scripts/test sets STREAM_FANOUT_SLICE=1: an event reaches one stream per loop turn, so a
    burst of events to eight streams of one channel is written over many turns, each event
    waiting for the one before (rt/streams.c). Every stream still gets every event once, in
    publishing order, and streams that close meanwhile are left out of the walk."""
    with user_streams(8) as (chan, streams):
        ids = [publish(chan, "chat-message", {"n": i}) for i in range(5)]
        streams[3].close()  # most likely while the walk is under way
        streams[6].close()
        ids += [publish(chan, "chat-message", {"n": i}) for i in range(5, 10)]
        for k, s in enumerate(streams):
            if k in (3, 6):
                continue
            got = [s.next("chat-message") for _ in range(10)]
            assert [e["data"]["n"] for e in got] == list(range(10))
            assert [e["id"] for e in got] == ids
            s.no_event("chat-message", wait=0.2)


PUBLISH_MANY = ("for i = 1, tonumber(ARGV[2]) do "
                "  local tail = '\"event\":\"chat-message\",\"data\":{\"n\":' .. i .. '}}' "
                "  local id = redis.call('XADD', KEYS[1], '*', 'm', tail) "
                "  redis.call('PUBLISH', ARGV[1], '{\"id\":\"' .. id .. '\",' .. tail) "
                "end return 1")


def test_burst_beyond_the_queue_bound_arrives_in_order():
    """1,500 events in one burst (one script, so they reach the worker together) to four streams
    of one channel, written one stream per loop turn (STREAM_FANOUT_SLICE=1): past 1,024 queued
    events the channel is written at once instead of queueing more (rt/streams.c,
    FANOUT_QUEUE_MAX), and every stream still gets every event once, in order."""
    with user_streams(4) as (chan, streams):
        for s in streams:
            s.check_events = False  # PUBLISH_MANY's events are the test's own
        redis_cli("EVAL", PUBLISH_MANY, 1, "events:" + chan, chan, 1500)
        for s in streams:
            got = [s.next("chat-message", timeout=20)["data"]["n"] for _ in range(1500)]
            assert got == list(range(1, 1501))
            s.no_event("chat-message", wait=0.2)


def test_stream_closes_on_sign_out_of_its_session_only():
    c, u = sign_up()
    other = Client()
    other.post_json("/api/auth/sign-in/email", {"email": u["email"], "password": u["password"]})
    with SSEStream(c, "/api/events/users/me/events") as s1, \
            SSEStream(other, "/api/events/users/me/events") as s2:
        time.sleep(0.2)
        c.post_json("/api/auth/sign-out")
        with pytest.raises(AssertionError, match="ended"):
            s1.next(timeout=5)
        # The other session's stream stays open and keeps receiving.
        publish("user:%s" % u["id"], "session-update", {"action": "updated", "mentorshipId": "x"})
        assert s2.next("session-update")["data"]["action"] == "updated"


def test_stream_closes_when_user_becomes_inactive():
    c, u = sign_up()
    with SSEStream(c, "/api/events/users/me/events") as s:
        time.sleep(0.2)
        psql("UPDATE users SET status = 'suspended' WHERE id = :'id'", id=u["id"])
        redis_cli("PUBLISH", "user:%s:control" % u["id"], '{"type":"user-inactive"}')
        with pytest.raises(AssertionError, match="ended"):
            s.next(timeout=5)
    assert_error(c.get("/api/events/users/me/events"), 401)


def test_stream_keeps_user_online(psql_value):
    c, u = sign_up()
    with SSEStream(c, "/api/events/users/me/events"):
        time.sleep(0.2)
        assert redis_cli("EXISTS", "presence:%s" % u["id"]) == "1"
        assert redis_cli("GET", "lastseen:%s" % u["id"]).isdigit()


def test_mentorship_stream_malformed_is_400_unknown_404():
    c, _ = sign_up()
    err = assert_error(c.get("/api/events/mentorships/not-a-uuid/events"), 400, "VALIDATION_ERROR")
    assert [d["field"] for d in err["details"]] == ["mentorshipId"]
    assert_error(c.get("/api/events/mentorships/0b8a4d1e-2f6c-4c7e-9a55-1d2e3f405162/events"), 404)


def test_pings_every_stream_ping_seconds():
    """Pings at the server's STREAM_PING_SECONDS (3 here: the default 25 s is the same wheel, and
    the deployment test sees a ping through nginx with it); the first may come up to a quarter
    of the interval early (spread over the wheel), the next ones one interval apart."""
    with second_coachd(STREAM_PING_SECONDS=3) as base:
        c, u = sign_up(client=Client(base_url=base))
        with SSEStream(c, "/api/events/users/me/events") as s:
            start = time.monotonic()
            first = s.next("ping", timeout=10)
            t1 = time.monotonic() - start
            assert 2.1 <= t1 <= 3.6, t1
            # A ping's id is the stream's position: it moves only when an event passed.
            assert first["id"]
            eid = publish("user:%s" % u["id"], "chat-message", {"n": 1})
            assert s.next("chat-message")["id"] == eid
            second = s.next("ping", timeout=10)
            t2 = time.monotonic() - start
            assert 2.6 <= t2 - t1 <= 3.5, t2 - t1
            assert second["id"] == eid != first["id"]
            third = s.next("ping", timeout=10)
            assert 2.6 <= time.monotonic() - start - t2 <= 3.5
            assert third["id"] == eid


@pytest.fixture(scope="module")
def two_workers():
    """A second coachd with WORKERS=2 on the same database and Redis."""
    with second_coachd(WORKERS=2) as base:
        yield base


def worker_of(response):
    """The worker's pid is the first half of X-Request-Id."""
    return response.headers["X-Request-Id"][:8]


def test_streams_on_every_worker_get_events(two_workers):
    c, u = sign_up()
    c.base_url = two_workers
    streams, workers = [], set()
    try:
        for _ in range(12):
            s = SSEStream(Client(base_url=two_workers), "/api/events/users/me/events",
                          cookies={"auth.session_token": c.session_token})
            assert s.status == 200
            streams.append(s)
            workers.add(worker_of(s.response))
        assert len(workers) == 2, "SO_REUSEPORT should spread 12 connections over both workers"
        time.sleep(0.3)
        publish("user:%s" % u["id"], "chat-message", {"n": 1})
        for s in streams:
            assert s.next("chat-message")["data"] == {"n": 1}
        # A sign-out answered by either worker closes the streams on both.
        r = c.post("/api/auth/sign-out")
        assert r.status_code == 200
        for s in streams:
            with pytest.raises(AssertionError, match="ended"):
                s.next(timeout=5)
    finally:
        for s in streams:
            s.close()
