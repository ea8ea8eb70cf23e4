"""Session management (docs/api.md "Sessions", docs/security.md V7): the caller's own sessions
listed and ended on better-auth's paths (list-sessions, revoke-session, revoke-other-sessions,
revoke-sessions), administrators ending a user's sessions (POST /api/users/:id/revoke-sessions),
signing in ending the session whose cookie the request carried, and the absolute lifetime
SESSION_ABSOLUTE_DAYS. Every ending closes the session's open streams and is seen at once by
another coachd on the same database and Redis (its cached context dropped before the answer)."""
import datetime
import os
import re
import tempfile
import time

import pytest

from helpers import (PASSWORD, SESSION_COOKIE, Client, as_client, assert_error, ended, psql,
                     psql_value, second_coachd, sign_in, sign_up, stream_for, unique_email)
from orgs import new_org

FIELDS = {"id", "token", "userId", "createdAt", "updatedAt", "expiresAt", "ipAddress",
          "userAgent", "current"}





def session_id(client):
    return client.get_json("/api/auth/session")["session"]["id"]


def parse_ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))


def cleared(r):
    """The answer clears the session cookie (as sign-out does)."""
    return re.search(r"auth\.session_token=;[^,]*Max-Age=0", r.headers.get("Set-Cookie", ""))


@pytest.fixture(scope="module")
def other():
    """A second coachd (two workers) on the same database and Redis: another worker's cache."""
    with second_coachd(WORKERS=2) as base:
        yield base


def warm(client, base):
    """The session's context is cached on the other coachd before the change."""
    c = as_client(client, base)
    for _ in range(3):
        c.get_json("/api/users/me")
    return c


# ---- list-sessions ------------------------------------------------------------------------------


def test_list_sessions_shape_current_flag_and_no_raw_tokens():
    c1, u = sign_up()
    c2, _ = sign_in(u["email"])
    stranger, _ = sign_up()
    r, body = c1.call("GET", "/api/auth/list-sessions", expect=200)
    assert isinstance(body, list) and len(body) == 2
    for s in body:
        assert set(s) == FIELDS
        assert s["token"] == s["id"] and s["userId"] == u["id"]
        assert parse_ts(s["createdAt"]) <= parse_ts(s["updatedAt"]) < parse_ts(s["expiresAt"])
        assert s["ipAddress"] and s["userAgent"]
    by_id = {s["id"]: s for s in body}
    assert by_id[session_id(c1)]["current"] is True
    assert by_id[session_id(c2)]["current"] is False
    assert session_id(stranger) not in by_id
    # Newest first; no session's raw token is in the answer (only hashes are stored).
    assert body[0]["id"] == session_id(c2)
    for t in (c1.session_token, c2.session_token):
        assert t not in r.text
    # The other session sees itself as current.
    assert [s["current"] for s in c2.get_json("/api/auth/list-sessions")
            if s["id"] == session_id(c2)] == [True]
    assert_error(Client().request("GET", "/api/auth/list-sessions"), 401, "UNAUTHENTICATED")


# ---- revoke-session -----------------------------------------------------------------------------


def test_revoke_session_by_id_ends_it_its_streams_and_on_the_other_coachd(other):
    c1, u = sign_up()
    c2, _ = sign_in(u["email"])
    victim = session_id(c2)
    there = warm(c2, other)
    mine = stream_for(c1, other)
    theirs = [stream_for(c2, other), stream_for(c2)]
    try:
        time.sleep(0.3)
        r, body = c1.call("POST", "/api/auth/revoke-session", {"token": victim}, expect=200)
        assert body == {"status": True}
        assert not cleared(r), "revoking another session cleared the caller's cookie"
        # The very next request, on the other coachd whose cache held it, is refused.
        assert_error(there.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        assert_error(c2.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        for s in theirs:
            assert ended(s), "a stream of the revoked session stayed open"
        assert not ended(mine, timeout=1), "the caller's own stream closed"
        c1.get_json("/api/users/me")
        assert [s["id"] for s in c1.get_json("/api/auth/list-sessions")] == [session_id(c1)]
        # Ended once: a second try finds nothing.
        assert_error(c1.request("POST", "/api/auth/revoke-session", json={"token": victim}),
                     404, "NOT_FOUND")
    finally:
        for s in [mine] + theirs:
            s.close()


def test_revoke_the_current_session_clears_the_cookie(other):
    c, u = sign_up()
    there = warm(c, other)
    token = c.session_token
    r, body = c.call("POST", "/api/auth/revoke-session", {"token": session_id(c)}, expect=200)
    assert body == {"status": True} and cleared(r)
    assert c.session_token is None
    stale = Client()
    stale.cookies.set(SESSION_COOKIE, token)
    assert_error(stale.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
    assert_error(there.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")


def test_revoke_session_by_raw_token():
    c1, u = sign_up()
    c2, _ = sign_in(u["email"])
    c1.post_json("/api/auth/revoke-session", {"token": c2.session_token})
    assert_error(c2.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
    c1.get_json("/api/users/me")


def test_another_users_session_cannot_be_revoked():
    c, _ = sign_up()
    victim, _ = sign_up()
    for token in (session_id(victim), victim.session_token):
        assert_error(c.request("POST", "/api/auth/revoke-session", json={"token": token}),
                     404, "NOT_FOUND")
    victim.get_json("/api/users/me")
    assert len(victim.get_json("/api/auth/list-sessions")) == 1


def test_revoke_session_needs_a_token():
    c, _ = sign_up()
    for body in ({}, {"token": ""}, {"token": "not a session"}, {"token": 5}):
        r = c.request("POST", "/api/auth/revoke-session", json=body)
        assert_error(r, 400, "VALIDATION_ERROR")
        assert "token" in r.text
    c.get_json("/api/users/me")


# ---- revoke-other-sessions and revoke-sessions --------------------------------------------------


def test_revoke_other_sessions_keeps_only_the_current_one(other):
    c1, u = sign_up()
    others = [sign_in(u["email"])[0] for _ in range(2)]
    there = [warm(o, other) for o in others]
    mine = stream_for(c1, other)
    theirs = [stream_for(o, other) for o in others]
    try:
        time.sleep(0.3)
        r, body = c1.call("POST", "/api/auth/revoke-other-sessions", expect=200)
        assert body == {"status": True} and not cleared(r)
        for t in there + others:
            assert_error(t.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        for s in theirs:
            assert ended(s)
        assert not ended(mine, timeout=1)
        assert [s["id"] for s in c1.get_json("/api/auth/list-sessions")] == [session_id(c1)]
    finally:
        for s in [mine] + theirs:
            s.close()


def test_revoke_sessions_ends_every_one_and_clears_the_cookie(other):
    c1, u = sign_up()
    c2, _ = sign_in(u["email"])
    there = [warm(c1, other), warm(c2, other)]
    streams = [stream_for(c1, other), stream_for(c2)]
    try:
        time.sleep(0.3)
        r, body = c1.call("POST", "/api/auth/revoke-sessions", expect=200)
        assert body == {"status": True} and cleared(r)
        for t in there + [c2]:
            assert_error(t.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        for s in streams:
            assert ended(s)
        assert psql_value("SELECT count(*) FROM sessions WHERE user_id = :'u'", u=u["id"]) == "0"
        sign_in(u["email"])  # the account is untouched
    finally:
        for s in streams:
            s.close()


# ---- administrators: POST /api/users/:id/revoke-sessions ----------------------------------------


def test_admin_ends_a_members_sessions_and_leaves_the_account(other):
    org = new_org(roles=("OrganizationAdmin", "Manager", "Coach"))
    coach, cu = org.clients["Coach"], org.users["Coach"]
    coach2, _ = sign_in(cu["email"])
    there = warm(coach, other)
    streams = [stream_for(coach, other), stream_for(coach2)]
    admin = org.clients["OrganizationAdmin"]
    try:
        time.sleep(0.3)
        # A Manager may not; nobody on themselves (the caller's own route is revoke-sessions).
        assert_error(org.clients["Manager"].request(
            "POST", "/api/users/%s/revoke-sessions" % cu["id"]), 403, "FORBIDDEN")
        r = admin.request("POST", "/api/users/me/revoke-sessions")
        assert_error(r, 403, "FORBIDDEN")
        assert "revoke-sessions" in r.json()["error"]["message"]
        coach.get_json("/api/users/me")
        assert admin.post_json("/api/users/%s/revoke-sessions" % cu["id"]) == {"success": True}
        for t in (there, coach, coach2):
            assert_error(t.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        for s in streams:
            assert ended(s)
        admin.get_json("/api/users/me")
        # The account is as it was: active, same password, still a member.
        assert admin.get_json("/api/users/%s" % cu["id"])["data"]["status"] == "active"
        again, _ = sign_in(cu["email"])
        again.org(org.id).get_json("/api/users/me")
        assert_error(admin.request("POST", "/api/users/%s/revoke-sessions" % ("c" + "0" * 24)),
                     404, "NOT_FOUND")
    finally:
        for s in streams:
            s.close()


# ---- signing in ends the session of the cookie it carried (ASVS 7.2.4) -------------------------


def test_sign_in_with_another_users_cookie_ends_that_session(other):
    a_client, a = sign_up()
    _, b = sign_up()
    a_token = a_client.session_token
    there = warm(a_client, other)
    a_alone = Client()  # the same session, from elsewhere
    a_alone.cookies.set(SESSION_COOKIE, a_token)
    stream = stream_for(a_alone, other)
    try:
        time.sleep(0.3)
        # The browser that held A's cookie signs in as B.
        r, body = a_client.call("POST", "/api/auth/sign-in/email",
                                {"email": b["email"], "password": PASSWORD}, expect=200)
        assert body["user"]["id"] == b["id"] and a_client.session_token != a_token
        for t in (there, a_alone):
            assert_error(t.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        assert ended(stream)
        assert a_client.get_json("/api/users/me")["data"]["id"] == b["id"]
    finally:
        stream.close()


def test_sign_in_again_ends_the_same_users_old_session():
    c, u = sign_up()
    old = c.session_token
    old_id = session_id(c)
    c.post_json("/api/auth/sign-in/email", {"email": u["email"], "password": PASSWORD})
    assert c.session_token != old
    ids = [s["id"] for s in c.get_json("/api/auth/list-sessions")]
    assert old_id not in ids and len(ids) == 1


def test_sign_up_with_another_users_cookie_ends_that_session():
    a_client, a = sign_up()
    a_alone = Client()
    a_alone.cookies.set(SESSION_COOKIE, a_client.session_token)
    sign_up(client=a_client)
    assert_error(a_alone.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")


def test_failed_sign_in_or_taken_email_keeps_the_session():
    c, u = sign_up()
    assert_error(c.request("POST", "/api/auth/sign-in/email",
                           json={"email": u["email"], "password": "wrong-password-1"}), 401)
    assert_error(c.request("POST", "/api/auth/sign-up/email",
                           json={"email": u["email"], "password": PASSWORD, "name": "Again"}),
                 409, "EMAIL_TAKEN")
    c.get_json("/api/users/me")


# ---- absolute lifetime (SESSION_ABSOLUTE_DAYS) --------------------------------------------------


def test_sliding_refresh_never_passes_the_default_30_days():
    # Due for its sliding refresh 29.5 days after sign-in: the refresh stops at 30 days.
    c, u = sign_up()
    sid = session_id(c)
    psql("UPDATE sessions SET created_at = now() - interval '29.5 days',"
         " expires_at = now() + interval '0.4 days' WHERE id = :'s'", s=sid)
    c.get_json("/api/users/me")
    deadline = time.monotonic() + 5
    while psql_value("SELECT updated_at > created_at + interval '1 day' FROM sessions"
                     " WHERE id = :'s'", s=sid) != "t":
        assert time.monotonic() < deadline, "the sliding refresh did not run"
        time.sleep(0.1)
    assert psql_value("SELECT abs(extract(epoch FROM expires_at - created_at) - 30 * 86400) < 1"
                      " FROM sessions WHERE id = :'s'", s=sid) == "t"
    [listed] = c.get_json("/api/auth/list-sessions")
    now = datetime.datetime.now(datetime.timezone.utc)
    assert parse_ts(listed["expiresAt"]) < now + datetime.timedelta(hours=13)

    # 30 days old in 4 seconds, with a sliding expiry a day away: used all along, it ends at 30.
    c, u = sign_up()
    sid = session_id(c)
    psql("UPDATE sessions SET created_at = now() - interval '30 days' + interval '4 seconds',"
         " expires_at = now() + interval '1 day' WHERE id = :'s'", s=sid)
    expires = parse_ts(c.get_json("/api/auth/session")["session"]["expiresAt"])
    now = datetime.datetime.now(datetime.timezone.utc)
    assert expires <= now + datetime.timedelta(seconds=5)
    started = time.monotonic()
    while c.request("GET", "/api/users/me").status_code == 200:
        assert time.monotonic() - started < 8, "the session outlived 30 days"
        time.sleep(0.3)
    assert_error(c.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")


def test_short_absolute_lifetime_ends_a_session_in_use_and_its_stream():
    log = tempfile.NamedTemporaryFile(delete=False)
    log.close()
    try:
        with second_coachd(SESSION_ABSOLUTE_DAYS="0.00005", log_path=log.name) as base:  # 4.32 s
            c = Client(base_url=base)
            r, body = c.call("POST", "/api/auth/sign-up/email",
                             {"email": unique_email("abs"), "password": PASSWORD,
                              "name": "Short Life"}, expect=200)
            assert "Max-Age=4;" in r.headers["Set-Cookie"]
            started = time.monotonic()
            expires = parse_ts(body["session"]["expiresAt"])
            now = datetime.datetime.now(datetime.timezone.utc)
            assert expires <= now + datetime.timedelta(seconds=5)
            stream = stream_for(c)
            try:
                while c.request("GET", "/api/users/me").status_code == 200:
                    assert time.monotonic() - started < 8, "the session outlived its cap"
                    time.sleep(0.2)
                assert time.monotonic() - started > 3, "it ended too early"
                assert ended(stream, timeout=3)
            finally:
                stream.close()
            token = c.session_token
        text = open(log.name, encoding="utf-8", errors="replace").read()
        assert token and token not in text, "a session token was logged"
    finally:
        os.unlink(log.name)


# ---- better-auth's own client, unchanged ------------------------------------------------------


def test_better_auth_client_lists_and_revokes_sessions():
    from test_real_clients import AuthClient, ok  # node and better-auth/client (package.json)
    ba = AuthClient()
    try:
        email = unique_email("ba-sessions")
        ok(ba.call("signUp.email", {"email": email, "password": PASSWORD, "name": "Real Client"}))
        laptop, _ = sign_in(email)
        phone, _ = sign_in(email)
        listed = ok(ba.call("listSessions"))
        assert len(listed) == 3 and sum(s["current"] for s in listed) == 1
        assert "/api/auth/list-sessions" in ba.call("listSessions")["url"]
        # The `token` of an entry is what revokeSession takes.
        [entry] = [s for s in listed if s["id"] == session_id(laptop)]
        assert ok(ba.call("revokeSession", {"token": entry["token"]})) == {"status": True}
        assert_error(laptop.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        assert len(ok(ba.call("listSessions"))) == 2
        assert ok(ba.call("revokeOtherSessions")) == {"status": True}
        assert_error(phone.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        [mine] = ok(ba.call("listSessions"))
        assert mine["current"] is True
        assert ok(ba.call("revokeSessions")) == {"status": True}
        assert ba.cookies() == {}
        assert ba.call("getSession")["data"] is None
        # Another user's session: refused, and it lives on.
        ok(ba.call("signIn.email", {"email": email, "password": PASSWORD}))
        stranger, _ = sign_up()
        res = ba.call("revokeSession", {"token": session_id(stranger)})
        assert res["status"] == 404 and res["data"] is None
        stranger.get_json("/api/users/me")
    finally:
        ba.close()
