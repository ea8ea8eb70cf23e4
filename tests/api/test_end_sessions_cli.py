"""`coachd end-sessions --all | --email E` (cli/end_sessions.c, ASVS 7.4.5): an operator ends
every session of every user, or of one account. After the DELETE commits, the command does what
the server does when sessions end: the users' open event streams close, and no worker of a
running coachd serves their cached caller contexts (the next request is 401). The running coachd
here keeps contexts for a minute (CONTEXT_CACHE_TTL_MS), so only the invalidation the command
publishes can make that request fail. --all runs on a database of its own (temp_database): it
ends every session it finds."""
import os
import subprocess
import time

import pytest

from helpers import (DATABASE_URL, REDIS_URL, ROOT, Client, as_client, assert_error, ended,
                     free_port, psql_at, psql_value, second_coachd, sign_in, sign_up, stream_for,
                     temp_database)

BIN = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
TTL = 60000  # a cached context lives this long unless invalidated


def end_sessions(*args, **env):
    full = dict(os.environ, DATABASE_URL=DATABASE_URL, REDIS_URL=REDIS_URL)
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return subprocess.run([BIN, "end-sessions", *args], capture_output=True, text=True,
                          env=full, timeout=60)




def warm(client, base):
    """The session's context is cached on `base` before the command runs."""
    c = as_client(client, base)
    for _ in range(3):
        c.get_json("/api/users/me")
    return c



@pytest.fixture(scope="module")
def other():
    """A coachd (two workers) on the test database and Redis, with long-lived cached contexts."""
    with second_coachd(WORKERS=2, CONTEXT_CACHE_TTL_MS=TTL) as base:
        yield base


def test_email_ends_only_that_accounts_sessions(other):
    a1, a = sign_up()
    a2, _ = sign_in(a["email"])
    b1, b = sign_up()
    a_there, b_there = warm(a1, other), warm(b1, other)
    a_stream, b_stream = stream_for(a2, other), stream_for(b1, other)
    try:
        time.sleep(0.3)
        r = end_sessions("--email", a["email"].upper())
        assert r.returncode == 0, r.stderr
        assert r.stdout == "Ended 2 sessions of 1 user.\n"
        for c in (a_there, a1, a2):
            assert_error(c.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        assert ended(a_stream)
        # The other account keeps its session, its cached context and its stream.
        assert b_there.get_json("/api/users/me")["data"]["id"] == b["id"]
        assert not ended(b_stream, timeout=1)
        assert psql_value("SELECT count(*) FROM sessions WHERE user_id = :'u'", u=a["id"]) == "0"
        assert psql_value("SELECT count(*) FROM sessions WHERE user_id = :'u'", u=b["id"]) == "1"
        sign_in(a["email"])  # the account is untouched
        # No session left: nothing ended, still success.
        a_only, _ = sign_in(a["email"])
        assert end_sessions("--email", a["email"]).stdout == "Ended 2 sessions of 1 user.\n"
        again = end_sessions("--email", a["email"])
        assert again.returncode == 0 and again.stdout == "Ended 0 sessions of 0 users.\n"
        assert_error(a_only.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
    finally:
        a_stream.close()
        b_stream.close()


def test_all_ends_every_session_of_every_user():
    with temp_database() as url, second_coachd(DATABASE_URL=url, WORKERS=2,
                                               CONTEXT_CACHE_TTL_MS=TTL) as base:
        a1, a = sign_up(client=Client(base_url=base))
        a2, _ = sign_in(a["email"], client=Client(base_url=base))
        b1, b = sign_up(client=Client(base_url=base))
        there = [warm(c, base) for c in (a1, a2, b1)]
        streams = [stream_for(a2, base), stream_for(b1, base)]
        try:
            time.sleep(0.3)
            r = end_sessions("--all", DATABASE_URL=url)
            assert r.returncode == 0, r.stderr
            assert r.stdout == "Ended 3 sessions of 2 users.\n"
            for c in there:
                assert_error(c.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
            for s in streams:
                assert ended(s)
            assert psql_at(url, "SELECT count(*) FROM sessions") == [("0",)]
            c, _ = sign_in(b["email"], client=Client(base_url=base))
            assert c.get_json("/api/users/me")["data"]["id"] == b["id"]
        finally:
            for s in streams:
                s.close()


@pytest.mark.parametrize("args", [
    [], ["--all", "--email", "someone@example.com"], ["--email"], ["--email", "not-an-email"],
    ["--all", "extra"], ["--everyone"], ["--email", "a@example.com", "--email", "b@example.com"],
])
def test_malformed_command_line_exits_2_and_changes_nothing(args):
    c, _ = sign_up()
    # No database or Redis needed to refuse it.
    r = end_sessions(*args, DATABASE_URL=None, REDIS_URL=None)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "usage: coachd end-sessions" in r.stderr and r.stdout == ""
    c.get_json("/api/users/me")


def test_unknown_email_exits_1():
    r = end_sessions("--email", "nobody-%s@example.com" % os.urandom(4).hex())
    assert r.returncode == 1 and "no account has the email" in r.stderr, r.stderr


def test_redis_or_database_down_exits_1_and_changes_nothing():
    c, u = sign_up()
    dead = "127.0.0.1:%d" % free_port()
    r = end_sessions("--email", u["email"], REDIS_URL="redis://%s" % dead)
    assert r.returncode == 1 and "Redis failed" in r.stderr and "no session was ended" in r.stderr
    r = end_sessions("--email", u["email"], DATABASE_URL="postgresql://%s/coachd" % dead)
    assert r.returncode == 1 and "database" in r.stderr.lower(), r.stderr
    assert c.get_json("/api/users/me")["data"]["id"] == u["id"]
