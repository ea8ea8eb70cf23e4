"""Two hosts: two coachd instances, each in a network namespace of its own (netns_lab.py), share
the test's PostgreSQL, Redis and sinks. Events and session ends cross hosts through Redis; a
host cut off from the network loses nothing it acknowledged, and the other keeps serving.

Needs root and `ip netns` (CI runs as root): without them the test fails and says why, rather
than skip: a green run must have proved what this file claims."""
import collections
import contextlib
import json
import os
import threading
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests

import netns_lab
from chat_fixtures import Chat
from helpers import (SESSION_COOKIE, Client, SSEStream, assert_error, psql, redis_cli,
                     second_coachd, sign_up, wait_until)
from orgs import new_org
from stream_check import injected


def relayed(lab, host, url):
    """`url` (a service on 127.0.0.1) as host `host` reaches it: through a relay on its link."""
    u = urlsplit(url)
    gw, port = lab.forward(host, u.hostname, u.port)
    netloc = ("%s@" % u.username if u.username else "") + "%s:%d" % (gw, port)
    return urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))


@pytest.fixture(scope="module")
def hosts():
    """{"a": base URL, "b": base URL, "lab": the Lab}; both servers stopped (exit 0 asserted)
    and the namespaces deleted at the end, whatever happened."""
    reason = netns_lab.check()
    if reason:
        pytest.fail(reason)
    services = {"DATABASE_URL": os.environ["COACHD_DATABASE_URL"],
                "REDIS_URL": os.environ["COACHD_REDIS_URL"],
                "SMTP_URL": os.environ["SMTP_URL"], "PUSH_URL": os.environ["PUSH_URL"]}
    with netns_lab.Lab(["a", "b"]) as lab, contextlib.ExitStack() as stack:
        out = {"lab": lab}
        for name in ("a", "b"):
            h = lab.host(name)
            env = {k: relayed(lab, name, v) for k, v in services.items()}
            # The test's clients all come from the gateway address: per-IP limits are not
            # what this file tests.
            env.update(RATE_LIMITER_ENABLED="false", AUTH_RATE_LIMIT_POINTS=0,
                       MAX_CONNECTIONS_PER_IP=0)
            out[name] = stack.enter_context(second_coachd(host=h.ip, netns=h.netns, **env))
        yield out


def on(client, base):
    """A client of `base` holding `client`'s session and organization."""
    c = Client(base_url=base, source_ip=False)
    c.cookies.set(SESSION_COOKIE, client.session_token)
    if "X-Organization-Id" in client.headers:
        c.headers["X-Organization-Id"] = client.headers["X-Organization-Id"]
    return c


def test_hosts_are_apart(hosts):
    """Each server runs in its own namespace, on an address only that namespace has."""
    lab = hosts["lab"]
    a, b = lab.host("a"), lab.host("b")
    assert urlsplit(hosts["a"]).hostname == a.ip and urlsplit(hosts["b"]).hostname == b.ip
    assert a.ip not in netns_lab.ip("-o", "addr", "show", netns=b.netns)
    assert a.ip in netns_lab.ip("-o", "addr", "show", netns=a.netns)
    for base in (hosts["a"], hosts["b"]):
        assert requests.get(base + "/api/auth/session", timeout=5).status_code == 200


def test_event_through_one_host_reaches_a_stream_on_the_other(hosts):
    chat = Chat()
    for src, dst in (("a", "b"), ("b", "a")):
        teacher = on(chat.c("Teacher"), hosts[dst])
        coach = on(chat.c("Coach"), hosts[src])
        with SSEStream(teacher, "/api/events/users/me/events") as us, \
                SSEStream(teacher, "/api/events/mentorships/%s/events" % chat.id) as ms:
            assert us.status == ms.status == 200
            time.sleep(0.3)  # the subscriptions are in place
            m = coach.post_json(chat.msgs(), {"body": "via %s" % src}, expect=201)["data"]
            for s in (us, ms):
                ev = s.next("chat-message")
                assert ev["data"]["id"] == m["id"] and ev["data"]["body"] == "via " + src


def test_sign_out_on_one_host_closes_its_stream_on_the_other(hosts):
    c, u = sign_up()
    other = Client()
    other.post_json("/api/auth/sign-in/email", {"email": u["email"], "password": u["password"]})
    on_b, other_b = on(c, hosts["b"]), on(other, hosts["b"])
    with SSEStream(on_b, "/api/events/users/me/events") as s, \
            SSEStream(other_b, "/api/events/users/me/events") as keep:
        assert s.status == keep.status == 200
        time.sleep(0.3)
        on(c, hosts["a"]).post_json("/api/auth/sign-out")
        with pytest.raises(AssertionError, match="ended"):
            s.next(timeout=5)
        # The user's other session keeps its stream: it still gets the user's events.
        redis_cli("PUBLISH", "user:%s" % u["id"], json.dumps(
            {"id": injected("1-two-hosts-1"), "event": "session-update",
             "data": {"action": "updated"}},
            separators=(",", ":")))  # compact, as coachd publishes
        assert keep.next("session-update")["data"] == {"action": "updated"}
    # B no longer knows the session (its caller cache was told, too).
    assert_error(on_b.get("/api/events/users/me/events"), 401)
    assert on_b.get_json("/api/auth/session") == {"session": None, "user": None}


def test_a_change_on_one_host_holds_for_the_next_request_on_the_other(hosts):
    """Read-your-writes of the caller-context cache across hosts (routes/ctx_cache.h): a
    sign-out and a role change answered by one host, then the very next request, on a new
    connection, to the other. CTX_RYW_ROUNDS rounds of each (as in
    test_context_read_your_writes.py; 20 here by default)."""
    rounds = int(os.environ.get("CTX_RYW_ROUNDS", "20"))
    org = new_org(roles=("OrganizationAdmin", "Teacher"))
    teacher, admin = org.clients["Teacher"], org.clients["OrganizationAdmin"]
    path = "/api/organizations/%s/users/%s" % (org.id, org.uid("Teacher"))
    stale = collections.Counter()
    for i in range(rounds):
        src, dst = ("a", "b") if i % 2 == 0 else ("b", "a")
        c, _ = sign_up()
        for _ in range(2):
            on(c, hosts[dst]).get("/api/users/me")
        on(c, hosts[src]).post_json("/api/auth/sign-out")
        if on(c, hosts[dst]).get("/api/users/me").status_code != 401:
            stale["sign-out"] += 1
        role = "Manager" if i % 2 == 0 else "Teacher"
        on(teacher, hosts[dst]).get("/api/users/me")
        on(admin, hosts[src]).patch_json(path, {"roleInOrganization": role})
        if on(teacher, hosts[dst]).get_json("/api/users/me")["data"]["role"] != role:
            stale["membership role"] += 1
    assert not stale, "stale answers in %d rounds: %s" % (rounds, dict(stale))


def test_host_cut_off_loses_nothing_acknowledged_and_the_other_serves(hosts):
    lab = hosts["lab"]
    chat = Chat()
    coach_a, coach_b = on(chat.c("Coach"), hosts["a"]), on(chat.c("Coach"), hosts["b"])
    teacher_b = on(chat.c("Teacher"), hosts["b"])
    acked, tried, statuses = [], [], collections.Counter()
    stop, cut = threading.Event(), threading.Event()

    def post_through_a():
        """Posts to A until told to stop; after the cut, gives up after 3 failures."""
        failures, n = 0, 0
        while not stop.is_set() and failures < 3:
            n += 1
            body = "from A #%d" % n
            tried.append(body)
            try:
                r = coach_a.post(chat.msgs(), json={"body": body,
                                                    "clientMessageId": str(uuid.uuid4())},
                                 timeout=3)
                statuses[r.status_code] += 1
                if r.status_code == 201:
                    acked.append((body, r.json()["data"]["id"]))
            except requests.RequestException:
                statuses["conn"] += 1
                if cut.is_set():
                    failures += 1
                time.sleep(0.3)

    with SSEStream(teacher_b, "/api/events/mentorships/%s/events" % chat.id) as sb:
        assert sb.status == 200
        time.sleep(0.3)
        t = threading.Thread(target=post_through_a, daemon=True)
        t.start()
        try:
            wait_until(lambda: len(acked) >= 15, timeout=30, what="15 messages through A")
            lab.cut("a")
            cut.set()
            # B keeps serving while A is cut off: posts, its stream, reads.
            from_b = [coach_b.post_json(chat.msgs(), {"body": "from B #%d" % i}, expect=201)["data"]
                      for i in range(5)]
            got = set()
            while len(got & {m["id"] for m in from_b}) < 5:
                got.add(sb.next("chat-message")["data"]["id"])
            t.join(30)
            assert not t.is_alive(), "posting through A did not give up after the cut"
            # A is unreachable (the cut is real).
            with pytest.raises(requests.RequestException):
                coach_a.get("/api/auth/session", timeout=2)
            assert set(statuses) <= {201, 503, "conn"}, statuses

            # Everything A acknowledged is in the database once, and B serves it.
            hist = coach_b.get_json(chat.msgs(), params={"limit": 100})["data"]
            assert len(hist) < 100, "more messages than one page: raise the page or post fewer"
            seen = collections.Counter(m["id"] for m in hist)
            for body, mid in acked:
                assert seen[mid] == 1, (body, mid, seen[mid])
            rows = psql("SELECT body, count(*) FROM chat_messages WHERE mentorship_id = :'m'"
                        " GROUP BY body", m=chat.id)
            per_body = {b: int(n) for b, n in rows}
            assert all(n == 1 for n in per_body.values()), per_body  # none twice, acked or not
            assert {b for b, _ in acked} <= set(per_body)
            assert {m["body"] for m in from_b} <= set(per_body)
            assert set(per_body) <= set(tried) | {m["body"] for m in from_b}
        finally:
            stop.set()
            lab.restore("a")
            t.join(30)

        # A recovers by itself once its link is back: it answers, and its events reach B.
        wait_until(lambda: _answers(hosts["a"]), timeout=30, what="host A answering again")
        m = wait_until(lambda: _post(coach_a, chat.msgs(), "after the cut"), timeout=60,
                       interval=1, what="a post through A after the cut")
        wait_until(lambda: sb.next("chat-message", timeout=30)["data"]["id"] == m["id"],
                   timeout=60, what="A's message on B's stream")


def _answers(base):
    try:
        return requests.get(base + "/api/auth/session", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _post(client, path, body):
    try:
        r = client.post(path, json={"body": body}, timeout=10)
    except requests.RequestException:
        return None
    return r.json()["data"] if r.status_code == 201 else None
