"""Accounts and tenants (docs/security.md "Accounts, tenants and sessions"): invites and
unverified email, cross-tenant control of users, invites never changing a membership, the
first-run, forget-password, change-password and push-token limits.

Tests that need INVITE_REQUIRE_VERIFIED_EMAIL on start a second coachd with it (same database and
Redis); the main test server runs with it off (development default)."""
import concurrent.futures
import re
import time
import uuid

import pytest

from helpers import (PASSWORD, SESSION_COOKIE, Client, assert_error, psql, psql_value,
                     redis_cli, second_coachd, sign_in, sign_up, unique_email)
from invite_orgs import add_member
from orgs import make_platform_admin, new_org


def invite(client, org_id, email, role="Coach", expect=201):
    return client.post_json("/api/organizations/%s/invites" % org_id,
                            {"email": email, "roleInOrganization": role}, expect=expect)


def on(base, client):
    """A client for server `base` holding `client`'s session cookie."""
    c = Client(base_url=base)
    c.cookies.set(SESSION_COOKIE, client.session_token)
    for h in ("X-Organization-Id",):
        if h in client.headers:
            c.headers[h] = client.headers[h]
    return c


def membership(org_id, user_id):
    rows = psql("SELECT role_in_organization, membership_status FROM organization_memberships"
                " WHERE organization_id = :'o' AND user_id = :'u'", o=org_id, u=user_id)
    return rows[0] if rows else None


# ---- invites and unverified email (item 3) --------------------------------------------------


@pytest.fixture(scope="module")
def verified_server():
    """A second coachd with INVITE_REQUIRE_VERIFIED_EMAIL=true."""
    with second_coachd(INVITE_REQUIRE_VERIFIED_EMAIL="true") as base:
        yield base


def test_unverified_account_cannot_take_an_invite(verified_server, mail):
    org = new_org(roles=("OrganizationAdmin",))
    email = unique_email("victim")
    inv = invite(org.clients["OrganizationAdmin"], org.id, email, role="OrganizationAdmin")["data"]
    # Someone signs up with the invited address without owning the mailbox.
    squatter, _ = sign_up(email=email)
    s = on(verified_server, squatter)
    # It does not see the invite, is not held by the invite gate, and cannot answer it.
    pending = s.get_json("/api/invites/my-pending")
    assert pending["data"] == [] and pending["meta"]["total_count"] == 0
    assert s.get("/api/organizations").json()["error"]["code"] != "INVITE_GATE"
    assert_error(s.post("/api/invites/%s/accept" % inv["id"], json={}), 403, "EMAIL_NOT_VERIFIED")
    assert_error(s.post("/api/invites/%s/decline" % inv["id"], json={}), 403, "EMAIL_NOT_VERIFIED")
    assert membership(org.id, squatter.user["id"]) is None
    assert psql_value("SELECT status FROM invites WHERE id = :'i'", i=inv["id"]) == "pending"
    # Once the mailbox is proven, the same account sees and accepts it.
    link = mail.wait_for(email, subject="erif").link("verify-email")
    assert Client().get(link, allow_redirects=False).status_code == 302
    assert s.get_json("/api/invites/my-pending")["meta"]["total_count"] == 1
    assert_error(s.get("/api/organizations"), 403, "INVITE_GATE")
    s.post_json("/api/invites/%s/accept" % inv["id"], {})
    assert membership(org.id, squatter.user["id"]) == ("OrganizationAdmin", "active")


def test_without_the_setting_unverified_accounts_answer_invites():
    # The main test server runs in development, where the setting defaults to off.
    org = new_org(roles=("OrganizationAdmin",))
    email = unique_email("dev")
    inv = invite(org.clients["OrganizationAdmin"], org.id, email)["data"]
    c, u = sign_up(email=email)
    assert c.get_json("/api/invites/my-pending")["meta"]["total_count"] == 1
    c.post_json("/api/invites/%s/accept" % inv["id"], {})
    assert membership(org.id, u["id"]) == ("Coach", "active")


def test_account_made_through_the_invite_token_is_verified(verified_server):
    org = new_org(roles=("OrganizationAdmin",))
    email = unique_email("bytoken")
    token = invite(org.clients["OrganizationAdmin"], org.id, email)["data"]["inviteToken"]
    Client().post_json("/api/invites/accept", {"token": token, "firstName": "Ana",
                                               "lastName": "Token", "password": PASSWORD})
    c, data = sign_in(email)
    assert data["user"]["emailVerified"] is True


def test_staff_created_user_gets_the_verification_mail(mail):
    org = new_org(roles=("Manager",))
    email = unique_email("staffmade")
    org.clients["Manager"].post_json("/api/users", {
        "email": email, "firstName": "Staff", "lastName": "Made", "password": PASSWORD},
        expect=201)
    link = mail.wait_for(email, subject="erif").link("verify-email")
    c, data = sign_in(email)
    assert data["user"]["emailVerified"] is False
    assert Client().get(link, allow_redirects=False).status_code == 302
    assert c.get_json("/api/auth/session")["user"]["emailVerified"] is True


def test_accept_with_token_compares_email_case_insensitively():
    org = new_org(roles=("OrganizationAdmin",))
    email = unique_email("casey")
    token = invite(org.clients["OrganizationAdmin"], org.id, email)["data"]["inviteToken"]
    r = Client().post_json("/api/invites/accept", {
        "token": token, "firstName": "Case", "lastName": "Y", "password": PASSWORD,
        "email": email.upper()})
    assert r["data"]["email"] == email


# ---- an invite never changes a membership (item 5) ------------------------------------------


def test_inviting_an_existing_member_conflicts():
    org = new_org(roles=("OrganizationAdmin", "Manager", "Teacher"))
    manager = org.clients["Manager"]
    teacher = org.users["Teacher"]
    assert_error(manager.post("/api/organizations/%s/invites" % org.id,
                              json={"email": teacher["email"], "roleInOrganization": "Coach"}),
                 409, "CONFLICT")
    # A disabled member too: only the OrganizationAdmin brings them back (PATCH).
    org.clients["OrganizationAdmin"].patch_json(
        "/api/organizations/%s/users/%s" % (org.id, teacher["id"]), {"membershipStatus": "disabled"})
    assert_error(manager.post("/api/organizations/%s/invites" % org.id,
                              json={"email": teacher["email"].upper(),
                                    "roleInOrganization": "Teacher"}), 409, "CONFLICT")
    assert membership(org.id, teacher["id"]) == ("Teacher", "disabled")


def test_accepting_never_changes_an_existing_membership():
    org = new_org(roles=("OrganizationAdmin", "Manager"))
    c, u = sign_up()
    # An invite sent before the membership existed, then the user is disabled as Teacher.
    inv = invite(org.clients["Manager"], org.id, u["email"], role="Coach")["data"]
    add_member(org.id, u["id"], "Teacher", status="disabled")
    c.post_json("/api/invites/%s/accept" % inv["id"], {})
    assert membership(org.id, u["id"]) == ("Teacher", "disabled")


# ---- cross-tenant control of users (item 4) -------------------------------------------------


def test_org_admin_cannot_change_status_of_a_user_of_another_org():
    a = new_org(roles=("OrganizationAdmin",))
    b = new_org(roles=("OrganizationAdmin", "Coach"))
    victim = b.users["Coach"]
    admin_a = a.clients["OrganizationAdmin"]
    # Adding an existing user by id is allowed...
    admin_a.post_json("/api/organizations/%s/users" % a.id,
                      {"userId": victim["id"], "roleInOrganization": "Teacher"}, expect=201)
    # ...but their status is global: org A may not suspend or archive them.
    assert_error(admin_a.patch("/api/users/%s" % victim["id"], json={"status": "suspended"}), 403)
    assert_error(admin_a.delete("/api/users/%s" % victim["id"]), 403)
    assert psql_value("SELECT status FROM users WHERE id = :'u'", u=victim["id"]) == "active"
    b.clients["Coach"].get_json("/api/users/me")
    # A user whose only active membership is in org A can still be suspended by it.
    _, own = a.add_member("Teacher", key="own")
    admin_a.patch_json("/api/users/%s" % own["id"], {"status": "suspended"})
    assert psql_value("SELECT status FROM users WHERE id = :'u'", u=own["id"]) == "suspended"
    # A PlatformAdmin may change anyone's status.
    pa, _ = make_platform_admin()
    pa.patch_json("/api/users/%s" % victim["id"], {"status": "inactive"})
    pa.patch_json("/api/users/%s" % victim["id"], {"status": "active"})


def test_org_admin_edits_profiles_of_active_members_only():
    org = new_org(roles=("OrganizationAdmin", "Teacher"))
    admin = org.clients["OrganizationAdmin"]
    teacher = org.users["Teacher"]
    admin.patch_json("/api/users/%s" % teacher["id"], {"firstName": "Renamed"})
    admin.patch_json("/api/organizations/%s/users/%s" % (org.id, teacher["id"]),
                     {"membershipStatus": "disabled"})
    assert_error(admin.patch("/api/users/%s" % teacher["id"], json={"firstName": "Again"}), 403)
    assert psql_value("SELECT first_name FROM users WHERE id = :'u'", u=teacher["id"]) == "Renamed"


def test_disabled_org_admin_membership_gives_no_admin_rights():
    org = new_org(roles=("OrganizationAdmin", "Teacher"))
    admin = org.clients["OrganizationAdmin"]
    psql("UPDATE organization_memberships SET membership_status = 'disabled'"
         " WHERE organization_id = :'o' AND user_id = :'u'", o=org.id,
         u=org.uid("OrganizationAdmin"))
    assert_error(admin.patch("/api/users/%s" % org.uid("Teacher"), json={"status": "suspended"}),
                 403)
    assert_error(admin.patch("/api/organizations/%s/users/%s" % (org.id, org.uid("Teacher")),
                             json={"roleInOrganization": "Coach"}), 403)


# ---- first-run (item 8) ---------------------------------------------------------------------


def test_first_run_is_rate_limited_and_checks_first():
    make_platform_admin()  # the platform is initialized (also when this file runs alone)
    c = Client()
    body = {"email": unique_email("late-admin"), "password": PASSWORD, "name": "Late Admin"}
    started = time.monotonic()
    codes = [c.post("/api/setup/first-run", json=body).status_code for _ in range(12)]
    # AUTH_RATE_LIMIT_POINTS is 10 in the test run: the already-initialized answer, then 429.
    assert codes[:10] == [409] * 10 and codes[10:] == [429, 429], codes
    assert psql_value("SELECT count(*) FROM users WHERE email = :'e'", e=body["email"]) == "0"
    assert time.monotonic() - started < 10


def test_a_flood_of_one_hashing_kind_does_not_hold_up_sign_in():
    # Sign-ups flood the hashing queue of a one-worker server (no auth limit); a sign-in sent
    # meanwhile is served in turn with them instead of after every sign-up queued before it.
    _, u = sign_up()
    with second_coachd(AUTH_RATE_LIMIT_POINTS=0) as base:
        def one_sign_up(_):
            return Client(base_url=base).post("/api/auth/sign-up/email", json={
                "email": unique_email("flood"), "password": PASSWORD, "name": "Flood User"})

        with concurrent.futures.ThreadPoolExecutor(40) as pool:
            futures = [pool.submit(one_sign_up, i) for i in range(80)]
            time.sleep(1.0)  # the queue is full of sign-ups
            done_before = sum(f.done() for f in futures)
            r = Client(base_url=base).post("/api/auth/sign-in/email",
                                           json={"email": u["email"], "password": PASSWORD})
            done_meanwhile = sum(f.done() for f in futures) - done_before
            assert all(f.result().status_code == 200 for f in futures)
        assert r.status_code == 200
        # Without lanes the sign-in waited for the ~40 sign-ups queued before it.
        assert done_meanwhile < 15, done_meanwhile


# ---- forget-password, change-password, push tokens (item 12) --------------------------------


def test_forget_password_has_a_silent_per_email_cooldown(mail):
    _, u = sign_up()
    for _ in range(3):
        r = Client().post_json("/api/auth/forget-password", {"email": u["email"]})
        assert r["success"] is True
    mail.wait_for(u["email"], subject="assword")
    time.sleep(1.5)
    assert len([m for m in mail.all_to(u["email"]) if "assword" in m.subject]) == 1
    assert psql_value("SELECT count(*) FROM verifications v JOIN users u ON u.id = v.user_id"
                      " WHERE u.email = :'e' AND v.kind = 'password_reset'", e=u["email"]) == "1"


def test_change_password_locks_after_five_wrong_passwords():
    c, u = sign_up()
    wrong = {"currentPassword": "not the password", "newPassword": "another-pass-1"}
    for _ in range(5):
        assert_error(c.post("/api/users/me/password", json=wrong), 400)
    r = c.post("/api/users/me/password", json=wrong)
    body = assert_error(r, 429, "RATE_LIMITED")
    secs = r.json()["retryAfterSeconds"]
    assert secs > 800 and r.headers["Retry-After"] == str(secs)
    assert body["message"] == ("Too many wrong current passwords for this account: at most 5 per "
                               "900 seconds; try again in %d seconds" % secs), body["message"]
    # Even the right password waits: the limit is on the account, not on the guess.
    right = {"currentPassword": PASSWORD, "newPassword": "another-pass-1"}
    assert_error(c.post("/api/users/me/password", json=right), 429, "RATE_LIMITED")
    assert body["message"]
    redis_cli("DEL", "rl:pw-change:%s" % u["id"])
    c.post_json("/api/users/me/password", right)


def test_push_tokens_per_user_are_capped_at_twenty():
    c, u = sign_up()
    tokens = ["ExponentPushToken[%s-%02d]" % (uuid.uuid4().hex[:8], i) for i in range(21)]
    for i, t in enumerate(tokens):
        c.post_json("/api/users/me/push-tokens", {"token": t, "platform": "ios"}, expect=201)
        # Distinct creation times, so "oldest" is well defined.
        psql("UPDATE push_tokens SET created_at = now() - make_interval(mins => :n)"
             " WHERE token = :'t'", n=100 - i, t=t)
    left = [t for (t,) in psql("SELECT token FROM push_tokens WHERE user_id = :'u'", u=u["id"])]
    assert len(left) == 20 and tokens[0] not in left and tokens[20] in left
    assert re.match(r"^ExponentPushToken", left[0])
