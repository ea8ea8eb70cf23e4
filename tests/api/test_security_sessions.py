"""Sessions and what outlives them (docs/security.md "Accounts, tenants and sessions"): streams
closed by every end of their session on every worker, user streams limited to active
memberships, the per-user stream cap, and live tokens removed from the outbox and the database."""
import time

import pytest

from helpers import (PASSWORD, Client, ended, psql, psql_value, publish_event, second_coachd,
                     sign_in, sign_up, stream_for, wait_until)
from ment_fixtures import make_mentorship, make_session
from orgs import new_org





@pytest.fixture(scope="module")
def two_workers():
    """A second coachd with WORKERS=2 on the same database and Redis."""
    with second_coachd(WORKERS=2) as base:
        yield base


# ---- every end of a session closes its streams (item 6) -------------------------------------


def test_password_change_closes_the_other_sessions_streams_on_every_worker(two_workers):
    c, u = sign_up()
    other, _ = sign_in(u["email"])
    mine = [stream_for(c, two_workers) for _ in range(4)]
    theirs = [stream_for(other, two_workers) for _ in range(6)]
    try:
        time.sleep(0.3)
        c.post_json("/api/users/me/password",
                    {"currentPassword": PASSWORD, "newPassword": "a-new-password-1"})
        started = time.monotonic()
        for s in theirs:
            assert ended(s), "a stream of an ended session stayed open"
        assert time.monotonic() - started < 3
        # The session that changed the password keeps its streams.
        publish_event("user:%s" % u["id"], "chat-message", {"n": 1})
        for s in mine:
            assert s.next("chat-message")["data"] == {"n": 1}
    finally:
        for s in mine + theirs:
            s.close()


def test_password_reset_closes_every_stream(mail):
    c, u = sign_up()
    with stream_for(c) as s:
        time.sleep(0.2)
        Client().post_json("/api/auth/forget-password", {"email": u["email"]})
        token = mail.wait_for(u["email"], subject="assword").token("token=")
        Client().post_json("/api/auth/reset-password",
                           {"token": token, "newPassword": "reset-password-1"})
        assert ended(s)


def test_session_expiry_closes_the_stream():
    c, u = sign_up()
    c.get_json("/api/auth/session")  # any sliding refresh of this session happened already
    psql("UPDATE sessions SET expires_at = now() + interval '2 seconds' WHERE user_id = :'u'",
         u=u["id"])
    with stream_for(c) as s:
        started = time.monotonic()
        assert ended(s, timeout=6)
        assert time.monotonic() - started < 5


def test_user_stream_carries_only_active_memberships():
    a = new_org(roles=("OrganizationAdmin", "Manager", "Coach", "Teacher"))
    b = new_org(roles=("OrganizationAdmin", "Manager", "Coach"))
    tc, teacher = a.clients["Teacher"], a.users["Teacher"]
    b.add_member("Teacher", user=(None, teacher))
    ma = make_mentorship(a)
    mb = make_mentorship(b)
    a.clients["OrganizationAdmin"].patch_json(
        "/api/organizations/%s/users/%s" % (a.id, teacher["id"]), {"membershipStatus": "disabled"})
    tc.org(b.id)
    with stream_for(tc) as s:
        time.sleep(0.3)
        make_session(a, ma["id"])
        make_session(b, mb["id"])
        ev = s.next("session-update")
        assert ev["data"]["mentorshipId"] == mb["id"]
        s.no_event("session-update", wait=1.0)
        # Re-enabled: the open stream carries org A's events again.
        a.clients["OrganizationAdmin"].patch_json(
            "/api/organizations/%s/users/%s" % (a.id, teacher["id"]),
            {"membershipStatus": "active"})
        time.sleep(0.3)
        make_session(a, ma["id"], scheduledAt="2031-01-10T10:00:00.000Z")
        assert s.next("session-update")["data"]["mentorshipId"] == ma["id"]


def test_user_stream_carries_chat_only_of_active_memberships():
    """Chat events carry their organization too: a member disabled in org A stops receiving A's
    chat on the user stream while B's still arrives."""
    a = new_org(roles=("OrganizationAdmin", "Manager", "Coach", "Teacher"))
    b = new_org(roles=("OrganizationAdmin", "Manager", "Coach"))
    tc, teacher = a.clients["Teacher"], a.users["Teacher"]
    b.add_member("Teacher", user=(None, teacher))
    ma = make_mentorship(a)
    mb = make_mentorship(b)
    a.clients["OrganizationAdmin"].patch_json(
        "/api/organizations/%s/users/%s" % (a.id, teacher["id"]), {"membershipStatus": "disabled"})
    tc.org(b.id)
    with stream_for(tc) as s:
        time.sleep(0.3)
        r = a.clients["Coach"].post_json("/api/mentorships/%s/chat/messages" % ma["id"],
                                         {"body": "in org A"}, expect=201)
        r = b.clients["Coach"].post_json("/api/mentorships/%s/chat/messages" % mb["id"],
                                         {"body": "in org B"}, expect=201)
        ev = s.next("chat-message")
        assert ev["data"]["mentorshipId"] == mb["id"]
        s.no_event("chat-message", wait=1.0)


# ---- at most 20 streams per user (item 12) --------------------------------------------------


def test_opening_a_21st_stream_closes_the_oldest(two_workers):
    c, u = sign_up()
    streams = []
    try:
        for i in range(20):
            streams.append(stream_for(c, two_workers if i % 2 else None))
            time.sleep(0.02)
        time.sleep(0.3)
        streams.append(stream_for(c, two_workers))
        assert ended(streams[0])
        for s in streams[1:]:
            s.no_event("never", wait=0.05)
        assert psql_value("SELECT 1") == "1"
    finally:
        for s in streams:
            s.close()


# ---- live tokens leave the outbox and the database (item 7) ---------------------------------


def test_sent_mail_keeps_no_body(mail):
    _, u = sign_up()
    Client().post_json("/api/auth/forget-password", {"email": u["email"]})
    mail.wait_for(u["email"], subject="assword")

    def stripped():
        rows = psql("SELECT sent_at IS NOT NULL, payload ? 'text', payload ? 'html' FROM outbox"
                    " WHERE payload->>'to' = :'e'", e=u["email"])
        return rows and all(r == ("t", "f", "f") for r in rows)
    wait_until(stripped, what="sent mail rows without their bodies")


def test_janitor_deletes_sent_rows_expired_sessions_and_used_tokens():
    _, u = sign_up()
    counts = ("SELECT (SELECT count(*) FROM outbox WHERE payload->>'to' = :'e' AND sent_at IS NOT"
              " NULL AND sent_at < now() - interval '1 hour'),"
              " (SELECT count(*) FROM sessions WHERE user_id = :'u' AND expires_at < now()),"
              " (SELECT count(*) FROM verifications WHERE user_id = :'u' AND used_at IS NOT NULL)")
    # The rows and their count in one transaction: the test server's own janitor may delete them
    # as soon as they are committed (it once did, between the insert and the count).
    got = psql("BEGIN;"
               " INSERT INTO outbox (kind, payload, sent_at) VALUES ('mail', jsonb_build_object("
               "'to', :'e'), now() - interval '2 hours');"
               " INSERT INTO sessions (id, user_id, token_hash, expires_at) VALUES"
               " (gen_random_uuid(), :'u', md5(random()::text), now() - interval '1 minute');"
               " INSERT INTO verifications (id, kind, user_id, token_hash, expires_at, used_at)"
               " VALUES (gen_random_uuid(), 'password_reset', :'u', md5(random()::text),"
               " now() + interval '1 hour', now() - interval '2 days'); " + counts + "; COMMIT;",
               e=u["email"], u=u["id"])
    assert got == [("1", "1", "1")]
    with second_coachd(JANITOR_INTERVAL_SECONDS=1):
        wait_until(lambda: psql(counts, e=u["email"], u=u["id"]) == [("0", "0", "0")],
                   timeout=15, what="the janitor's deletions")
    # The live session is untouched.
    assert psql_value("SELECT count(*) FROM sessions WHERE user_id = :'u'", u=u["id"]) == "1"
