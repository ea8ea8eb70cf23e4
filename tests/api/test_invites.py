"""Invites (docs/api.md "Invites"): create and resend,
the organization's pending list, token resolution, the legacy accept that creates the account,
the caller's pending list, accept and decline by id, and both onboarding flows end to end.

Organizations come from orgs.new_org (through the API); a membership in a state the API does not
create (disabled from the start, not the current organization) is written with SQL
(invite_orgs.add_member)."""
import hashlib
import re
import uuid
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import pytest

from helpers import PASSWORD, Client, assert_error, psql, psql_value, sign_in, sign_up, unique_email
from invite_orgs import add_member
from orgs import make_platform_admin, new_org

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def ts(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def invite(client, org_id, email, role="Coach", expect=201, headers=None, **extra):
    body = {"email": email, "roleInOrganization": role}
    body.update(extra)
    return client.post_json("/api/organizations/%s/invites" % org_id, body, expect=expect,
                            headers=headers)


def expire(invite_id):
    psql("UPDATE invites SET expires_at = now() - interval '1 minute' WHERE id = :'id'",
         id=invite_id)


@pytest.fixture
def org():
    return new_org()


# ---- POST /api/organizations/:id/invites ----------------------------------------------------


def test_create_invite_fields_token_and_mail(org, mail):
    email = unique_email("New.Person")
    before = datetime.now(timezone.utc)
    d = invite(org.clients["OrganizationAdmin"], org.id, email.upper(), "Coach")["data"]
    assert UUID.match(d["id"])
    assert d["email"] == email.lower()
    assert d["roleInOrganization"] == "Coach" and d["status"] == "pending"
    assert d["organizationId"] == org.id
    assert ISO.match(d["expiresAt"]) and ISO.match(d["createdAt"])
    delta = ts(d["expiresAt"]) - before
    assert timedelta(days=7) - timedelta(minutes=1) < delta < timedelta(days=7, minutes=1)
    # Development: the token is in the response; only its hash is stored.
    token = d["inviteToken"]
    assert len(token) >= 43
    row = psql("SELECT token_hash, invited_by, status FROM invites WHERE id = :'id'", id=d["id"])[0]
    assert row == (hashlib.sha256(token.encode()).hexdigest(),
                   org.users["OrganizationAdmin"]["id"], "pending")
    # The mail carries the frontend's invite link with the same token, in English by default.
    m = mail.wait_for(email.lower())
    link = m.link("/invite?token=")
    assert urlsplit(link).path == "/invite"
    assert parse_qs(urlsplit(link).query)["token"] == [token]
    assert org.name in m.subject and "invited" in m.subject.lower()
    assert "Member OrganizationAdmin" in m.text and "Coach" in m.text


def test_create_validation(org):
    c = org.clients["OrganizationAdmin"]
    path = "/api/organizations/%s/invites" % org.id
    err = assert_error(c.post(path, json={}), 400, "VALIDATION_ERROR")
    assert {d["field"] for d in err["details"]} == {"email", "roleInOrganization"}
    for bad in ("Owner", "PlatformAdmin", "coach", "", 3):
        err = assert_error(c.post(path, json={"email": unique_email(), "roleInOrganization": bad}),
                           400, "VALIDATION_ERROR")
        assert [d["field"] for d in err["details"]] == ["roleInOrganization"]
    assert_error(c.post(path, json={"email": "not-an-email", "roleInOrganization": "Coach"}), 400)
    for days in (0, 31, -1, "7", 1.5, True):
        err = assert_error(c.post(path, json={"email": unique_email(), "roleInOrganization": "Coach",
                                              "expiresInDays": days}), 400, "VALIDATION_ERROR")
        assert [d["field"] for d in err["details"]] == ["expiresInDays"]
    assert_error(c.post(path, json={"email": unique_email(), "roleInOrganization": "Coach",
                                    "preferredLanguage": "fr"}), 400, "VALIDATION_ERROR")
    assert_error(c.post("/api/organizations/not-a-uuid/invites",
                        json={"email": unique_email(), "roleInOrganization": "Coach"}), 400)
    assert_error(Client().post(path, json={"email": unique_email(), "roleInOrganization": "Coach"}),
                 401, "UNAUTHENTICATED")


def test_expires_in_days_bounds(org):
    c = org.clients["OrganizationAdmin"]
    for days in (1, 30):
        before = datetime.now(timezone.utc)
        d = invite(c, org.id, unique_email(), expiresInDays=days)["data"]
        delta = ts(d["expiresAt"]) - before
        assert timedelta(days=days) - timedelta(minutes=1) < delta < timedelta(days=days, minutes=1)


def test_resend_refreshes_token_expiry_and_mail(org, mail):
    c = org.clients["OrganizationAdmin"]
    email = unique_email("resend")
    first = invite(c, org.id, email, "Teacher", expiresInDays=2)["data"]
    mail.wait_for(email)
    r, body = c.call("POST", "/api/organizations/%s/invites" % org.id,
                     {"email": email.upper(), "roleInOrganization": "Coach"})
    assert r.status_code == 200, r.text
    again = body["data"]
    assert again["id"] == first["id"] and again["status"] == "pending"
    assert again["roleInOrganization"] == "Coach"  # the latest request's role
    assert again["inviteToken"] != first["inviteToken"]
    assert ts(again["expiresAt"]) > ts(first["expiresAt"]) + timedelta(days=4)
    assert again["createdAt"] == first["createdAt"]
    assert psql_value("SELECT count(*) FROM invites WHERE email = :'e'", e=email) == "1"
    # The old link stops working; the new one resolves.
    assert_error(Client().get("/api/invites/%s" % first["inviteToken"]), 404, "NOT_FOUND")
    assert Client().get_json("/api/invites/%s" % again["inviteToken"])["data"]["isAvailable"]
    m = mail.wait_for(email, count=2)
    assert m.token("/invite") == again["inviteToken"]


def test_expired_pending_invite_is_replaced_by_a_new_one(org):
    c = org.clients["OrganizationAdmin"]
    email = unique_email("stale")
    old = invite(c, org.id, email)["data"]
    expire(old["id"])
    new = invite(c, org.id, email, expect=201)["data"]
    assert new["id"] != old["id"] and new["status"] == "pending"
    assert psql_value("SELECT status FROM invites WHERE id = :'id'", id=old["id"]) == "expired"
    info = Client().get_json("/api/invites/%s" % old["inviteToken"])["data"]
    assert info["status"] == "expired" and info["isAvailable"] is False


def test_mail_language(org, mail):
    c = org.clients["OrganizationAdmin"]
    # An existing account's preferred language wins over the body and the header.
    _, u = sign_up(lang="es")
    invite(c, org.id, u["email"], preferredLanguage="en", headers={"Accept-Language": "en"})
    m = mail.wait_for(u["email"], subject=org.name)
    assert m.subject.startswith("Invitación") and "Coach" in m.text
    # No account: the body's preferredLanguage, else the inviter's Accept-Language, else en.
    e1, e2, e3 = unique_email("es1"), unique_email("es2"), unique_email("en")
    invite(c, org.id, e1, "Teacher", preferredLanguage="es")
    invite(c, org.id, e2, "Teacher", headers={"Accept-Language": "es-MX,es;q=0.9"})
    invite(c, org.id, e3, "Teacher")
    assert "Docente" in mail.wait_for(e1).text
    assert mail.wait_for(e2).subject.startswith("Invitación")
    assert mail.wait_for(e3).subject.startswith("You're invited")
    # The link opens the invite page in the mail's language.
    for e, lang in ((u["email"], "es"), (e1, "es"), (e2, "es"), (e3, "en")):
        link = mail.wait_for(e, subject=org.name).link("/invite?token=")
        assert parse_qs(urlsplit(link).query)["lang"] == [lang], link


def test_create_role_rules(org):
    path = "/api/organizations/%s/invites" % org.id
    mgr = org.clients["Manager"]
    for role in ("Coach", "Teacher"):
        invite(mgr, org.id, unique_email(), role)
    for role in ("Manager", "OrganizationAdmin"):
        assert_error(mgr.post(path, json={"email": unique_email(), "roleInOrganization": role}),
                     403, "FORBIDDEN")
    for who in ("Coach", "Teacher"):
        assert_error(org.clients[who].post(path, json={"email": unique_email(),
                                                       "roleInOrganization": "Teacher"}),
                     403, "FORBIDDEN")
    for role in ("OrganizationAdmin", "Manager", "Coach", "Teacher"):
        invite(org.clients["OrganizationAdmin"], org.id, unique_email(), role)
    # A Manager may not refresh (and so re-role) a pending Manager invite.
    email = unique_email("mgr")
    invite(org.clients["OrganizationAdmin"], org.id, email, "Manager")
    assert_error(mgr.post(path, json={"email": email, "roleInOrganization": "Teacher"}), 403)
    # Another organization's admin, and a user without membership: 403.
    other = new_org(roles=("OrganizationAdmin",))
    assert_error(other.clients["OrganizationAdmin"].org(None).post(
        path, json={"email": unique_email(), "roleInOrganization": "Coach"}), 403, "FORBIDDEN")
    loner, _ = sign_up()
    assert_error(loner.post(path, json={"email": unique_email(), "roleInOrganization": "Coach"}),
                 403, "FORBIDDEN")
    # A disabled membership gives no role.
    psql("UPDATE organization_memberships SET membership_status = 'disabled'"
         " WHERE organization_id = :'o' AND user_id = :'u'", o=org.id, u=org.users["Manager"]["id"])
    assert_error(mgr.org(None).post(path, json={"email": unique_email(),
                                                "roleInOrganization": "Coach"}), 403)


def test_global_roles_any_org():
    org = new_org(roles=())
    for role in ("PlatformAdmin", "Owner"):
        c, _ = make_platform_admin(role)
        d = invite(c, org.id, unique_email(), "OrganizationAdmin")["data"]
        assert d["roleInOrganization"] == "OrganizationAdmin"
        data = c.get_json("/api/organizations/%s/invites" % org.id)
        assert d["id"] in [i["id"] for i in data["data"]]
        missing = "/api/organizations/%s/invites" % uuid.uuid4()
        assert_error(c.post(missing, json={"email": unique_email(), "roleInOrganization": "Coach"}),
                     404, "NOT_FOUND")
        assert_error(c.get(missing), 404, "NOT_FOUND")


# ---- GET /api/organizations/:id/invites ------------------------------------------------------


def test_list_pending_invites_and_role_rules(org):
    admin = org.clients["OrganizationAdmin"]
    made = {role: invite(admin, org.id, unique_email(role.lower()), role)["data"]
            for role in ("OrganizationAdmin", "Manager", "Coach", "Teacher")}
    expired = invite(admin, org.id, unique_email("exp"), "Coach")["data"]
    expire(expired["id"])
    declined = invite(admin, org.id, unique_email("dec"), "Coach")["data"]
    psql("UPDATE invites SET status = 'revoked' WHERE id = :'id'", id=declined["id"])

    data = admin.get_json("/api/organizations/%s/invites" % org.id)
    assert data["meta"]["total_count"] == 4 == len(data["data"])
    ids = {i["id"] for i in data["data"]}
    assert ids == {d["id"] for d in made.values()}
    item = [i for i in data["data"] if i["id"] == made["Coach"]["id"]][0]
    assert set(item) >= {"id", "email", "roleInOrganization", "status", "expiresAt", "createdAt"}
    assert "inviteToken" not in item
    assert item["email"] == made["Coach"]["email"] and item["status"] == "pending"
    assert item["expiresAt"] == made["Coach"]["expiresAt"]
    # Newest first.
    created = [i["createdAt"] for i in data["data"]]
    assert created == sorted(created, reverse=True)

    mgr = org.clients["Manager"].get_json("/api/organizations/%s/invites" % org.id)
    assert {i["roleInOrganization"] for i in mgr["data"]} == {"Coach", "Teacher"}
    assert mgr["meta"]["total_count"] == 2
    for who in ("Coach", "Teacher"):
        assert_error(org.clients[who].get("/api/organizations/%s/invites" % org.id), 403, "FORBIDDEN")
    other = new_org(roles=("OrganizationAdmin",))
    assert_error(other.clients["OrganizationAdmin"].org(None).get(
        "/api/organizations/%s/invites" % org.id), 403, "FORBIDDEN")
    assert_error(admin.get("/api/organizations/nope/invites"), 400)
    assert_error(Client().get("/api/organizations/%s/invites" % org.id), 401)
    # An empty list.
    empty = new_org(roles=("OrganizationAdmin",))
    assert empty.clients["OrganizationAdmin"].get_json(
        "/api/organizations/%s/invites" % empty.id) == {"data": [], "meta": {"total_count": 0}}


# ---- GET /api/invites/:token -----------------------------------------------------------------


def test_resolve_token(org):
    anon = Client()
    assert_error(anon.get("/api/invites/" + "x" * 43), 404, "NOT_FOUND")
    # A malformed token is a malformed path parameter (test_path_ids.py).
    err = assert_error(anon.get("/api/invites/short"), 400, "VALIDATION_ERROR")
    assert [d["field"] for d in err["details"]] == ["token"]
    d = invite(org.clients["OrganizationAdmin"], org.id, unique_email(), "Teacher")["data"]
    data = anon.get_json("/api/invites/%s" % d["inviteToken"])["data"]
    assert data == {"email": d["email"], "roleInOrganization": "Teacher",
                    "organizationName": org.name, "status": "pending",
                    "expiresAt": d["expiresAt"], "isAvailable": True, "hasAccount": False}
    # An existing account.
    _, u = sign_up()
    d2 = invite(org.clients["OrganizationAdmin"], org.id, u["email"])["data"]
    assert anon.get_json("/api/invites/%s" % d2["inviteToken"])["data"]["hasAccount"] is True
    # Expired: reported as such, not available.
    expire(d["id"])
    data = anon.get_json("/api/invites/%s" % d["inviteToken"])["data"]
    assert data["status"] == "expired" and data["isAvailable"] is False
    # Revoked.
    psql("UPDATE invites SET status = 'revoked' WHERE id = :'id'", id=d2["id"])
    data = anon.get_json("/api/invites/%s" % d2["inviteToken"])["data"]
    assert data["status"] == "revoked" and data["isAvailable"] is False


# ---- POST /api/invites/accept (new user) -----------------------------------------------------


def test_onboarding_new_user_end_to_end(org, mail):
    email = unique_email("newbie")
    invite(org.clients["Manager"], org.id, email, "Coach")
    token = mail.wait_for(email).token("/invite")
    anon = Client()
    info = anon.get_json("/api/invites/%s" % token)["data"]
    assert info["isAvailable"] and not info["hasAccount"] and info["organizationName"] == org.name
    r, body = anon.call("POST", "/api/invites/accept",
                        {"token": token, "firstName": "Ada", "lastName": "Lovelace",
                         "password": PASSWORD, "email": email, "preferredLanguage": "es"})
    assert r.status_code == 200, r.text
    d = body["data"]
    assert set(d) == {"userId", "email", "organizationId", "roleInOrganization"}
    assert d["email"] == email and d["organizationId"] == org.id
    assert d["roleInOrganization"] == "Coach" and re.match(r"^c[0-9a-z]{24}$", d["userId"])
    # Not signed in by this call.
    assert "auth.session_token" not in r.headers.get("Set-Cookie", "")
    assert_error(anon.get("/api/users/me"), 401)
    # The token is used up.
    info = anon.get_json("/api/invites/%s" % token)["data"]
    assert info["status"] == "accepted" and info["isAvailable"] is False and info["hasAccount"]
    # Sign in: in the organization with the role, as current organization.
    c, _ = sign_in(email)
    me = c.get_json("/api/users/me")["data"]
    assert me["id"] == d["userId"] and me["firstName"] == "Ada" and me["lastName"] == "Lovelace"
    assert me["currentOrganizationId"] == org.id and me["orgId"] == org.id
    assert me["role"] == "Coach" and me["preferredLanguage"] == "es"
    assert me["emailVerified"] is True
    assert c.get_json("/api/invites/my-pending")["data"] == []
    row = psql("SELECT role_in_organization, membership_status FROM organization_memberships"
               " WHERE organization_id = :'o' AND user_id = :'u'", o=org.id, u=d["userId"])
    assert row == [("Coach", "active")]
    h = psql_value("SELECT password_hash FROM accounts WHERE user_id = :'u'", u=d["userId"])
    assert h.startswith("$argon2id$")
    # Accepting again: the token is no longer valid.
    assert_error(anon.post("/api/invites/accept", json={
        "token": token, "firstName": "A", "lastName": "B", "password": PASSWORD}), 400,
        "VALIDATION_ERROR")


def test_accept_legacy_language_defaults(org):
    admin = org.clients["OrganizationAdmin"]
    for header, want in ((None, "en"), ("es-ES,es;q=0.8", "es")):
        email = unique_email("lang")
        token = invite(admin, org.id, email)["data"]["inviteToken"]
        headers = {"Accept-Language": header} if header else {}
        uid = Client().post_json("/api/invites/accept", {
            "token": token, "firstName": "A", "lastName": "B", "password": PASSWORD},
            headers=headers)["data"]["userId"]
        assert psql_value("SELECT preferred_language FROM users WHERE id = :'u'", u=uid) == want


def test_accept_legacy_errors(org):
    admin = org.clients["OrganizationAdmin"]
    anon = Client()
    err = assert_error(anon.post("/api/invites/accept", json={}), 400, "VALIDATION_ERROR")
    assert {d["field"] for d in err["details"]} == {"token", "firstName", "lastName", "password"}
    email = unique_email("acc")
    token = invite(admin, org.id, email)["data"]["inviteToken"]
    base = {"token": token, "firstName": "A", "lastName": "B", "password": PASSWORD}
    err = assert_error(anon.post("/api/invites/accept", json=dict(base, password="short")), 400)
    assert [d["field"] for d in err["details"]] == ["password"]
    assert_error(anon.post("/api/invites/accept", json=dict(base, firstName="x" * 101)), 400)
    assert_error(anon.post("/api/invites/accept", json=dict(base, preferredLanguage="de")), 400)
    # Unknown or malformed token.
    assert_error(anon.post("/api/invites/accept", json=dict(base, token="x" * 43)), 400,
                 "VALIDATION_ERROR")
    assert_error(anon.post("/api/invites/accept", json=dict(base, token="bad token")), 400)
    # Email mismatch: another address (case does not matter: test_security_tenancy.py).
    err = assert_error(anon.post("/api/invites/accept", json=dict(base, email=unique_email())), 400)
    assert err["details"][0]["field"] == "email"
    # Nothing was created by the failures.
    assert psql_value("SELECT count(*) FROM users WHERE email = :'e'", e=email) == "0"
    # Expired.
    token2 = invite(admin, org.id, unique_email())["data"]
    expire(token2["id"])
    err = assert_error(anon.post("/api/invites/accept", json=dict(base, token=token2["inviteToken"])),
                       400, "VALIDATION_ERROR")
    assert "expired" in err["message"].lower() or "expired" in str(err.get("details"))
    # Revoked.
    token3 = invite(admin, org.id, unique_email())["data"]
    psql("UPDATE invites SET status = 'revoked' WHERE id = :'id'", id=token3["id"])
    assert_error(anon.post("/api/invites/accept", json=dict(base, token=token3["inviteToken"])), 400)
    # A user with this email exists: 409, and the invite stays pending.
    _, u = sign_up()
    d = invite(admin, org.id, u["email"])["data"]
    assert_error(anon.post("/api/invites/accept", json=dict(base, token=d["inviteToken"])), 409,
                 "EMAIL_TAKEN")
    assert psql_value("SELECT status FROM invites WHERE id = :'id'", id=d["id"]) == "pending"
    # The exact address is accepted.
    anon.post_json("/api/invites/accept", dict(base, email=email))


# ---- my-pending, accept and decline by id (existing user) ------------------------------------


def test_onboarding_existing_user_end_to_end(org):
    c, u = sign_up()
    other = new_org(roles=("OrganizationAdmin",))
    a = invite(org.clients["OrganizationAdmin"], org.id, u["email"].upper(), "Teacher")["data"]
    b = invite(other.clients["OrganizationAdmin"], other.id, u["email"], "Manager")["data"]
    info = Client().get_json("/api/invites/%s" % a["inviteToken"])["data"]
    assert info["hasAccount"] is True
    c, _ = sign_in(u["email"])
    data = c.get_json("/api/invites/my-pending")
    assert data["meta"]["total_count"] == 2
    items = {i["id"]: i for i in data["data"]}
    assert set(items) == {a["id"], b["id"]}
    assert items[a["id"]] == {"id": a["id"], "email": u["email"], "organizationId": org.id,
                              "organizationName": org.name, "roleInOrganization": "Teacher",
                              "status": "pending", "expiresAt": a["expiresAt"],
                              "createdAt": a["createdAt"]}
    assert items[b["id"]]["organizationName"] == other.name
    # Accept one: membership with the role, and the first organization becomes the current one.
    got = c.post_json("/api/invites/%s/accept" % a["id"])["data"]
    assert got == {"id": a["id"], "organizationId": org.id, "roleInOrganization": "Teacher",
                   "status": "accepted"}
    assert [i["id"] for i in c.get_json("/api/invites/my-pending")["data"]] == [b["id"]]
    # Decline the other.
    r, body = c.call("POST", "/api/invites/%s/decline" % b["id"])
    assert r.status_code == 200, r.text
    assert body["data"]["status"] == "revoked" and body["data"]["id"] == b["id"]
    assert psql_value("SELECT status FROM invites WHERE id = :'id'", id=b["id"]) == "revoked"
    assert c.get_json("/api/invites/my-pending") == {"data": [], "meta": {"total_count": 0}}
    me = c.get_json("/api/users/me")["data"]
    assert me["currentOrganizationId"] == org.id and me["role"] == "Teacher"
    assert psql("SELECT organization_id FROM organization_memberships WHERE user_id = :'u'",
                u=u["id"]) == [(org.id,)]
    # Both are final now.
    assert_error(c.post("/api/invites/%s/accept" % a["id"]), 400, "VALIDATION_ERROR")
    assert_error(c.post("/api/invites/%s/decline" % a["id"]), 400, "VALIDATION_ERROR")
    assert_error(c.post("/api/invites/%s/accept" % b["id"]), 400, "VALIDATION_ERROR")


def test_accept_and_decline_errors(org):
    admin = org.clients["OrganizationAdmin"]
    c, u = sign_up()
    stranger, _ = sign_up()
    d = invite(admin, org.id, u["email"])["data"]
    for action in ("accept", "decline"):
        path = "/api/invites/%s/%s" % (d["id"], action)
        assert_error(Client().post(path), 401, "UNAUTHENTICATED")
        assert_error(stranger.post(path), 403, "FORBIDDEN")
        assert_error(c.post("/api/invites/%s/%s" % (uuid.uuid4(), action)), 404, "NOT_FOUND")
        assert_error(c.post("/api/invites/not-a-uuid/%s" % action), 400, "VALIDATION_ERROR")
    # Expired: 400 for both.
    expire(d["id"])
    assert_error(c.post("/api/invites/%s/accept" % d["id"]), 400, "VALIDATION_ERROR")
    assert_error(c.post("/api/invites/%s/decline" % d["id"]), 400, "VALIDATION_ERROR")
    assert psql_value("SELECT count(*) FROM organization_memberships WHERE user_id = :'u'",
                      u=u["id"]) == "0"
    # The email comparison ignores case (invited with the address in upper case).
    e = invite(admin, org.id, u["email"].upper())["data"]
    c.post_json("/api/invites/%s/accept" % e["id"])


def test_accept_keeps_existing_membership_and_current_org(org):
    # Only an OrganizationAdmin's PATCH changes a membership (docs/security.md): an invite to a
    # member answers 409, and one sent before the membership existed leaves it as it is.
    admin = org.clients["OrganizationAdmin"]
    first = new_org(roles=())
    c, u = sign_up()
    add_member(first.id, u["id"], "Coach")  # current organization: first
    d = invite(admin, org.id, u["email"], "Manager")["data"]
    add_member(org.id, u["id"], "Coach", status="disabled", current=False)
    assert_error(admin.post("/api/organizations/%s/invites" % org.id,
                            json={"email": u["email"], "roleInOrganization": "Manager"}),
                 409, "CONFLICT")
    c.post_json("/api/invites/%s/accept" % d["id"])
    row = psql("SELECT role_in_organization, membership_status FROM organization_memberships"
               " WHERE organization_id = :'o' AND user_id = :'u'", o=org.id, u=u["id"])
    assert row == [("Coach", "disabled")]
    assert psql_value("SELECT current_organization_id FROM users WHERE id = :'u'",
                      u=u["id"]) == first.id
    assert_error(c.org(org.id).get("/api/users/me"), 403)


def test_global_user_accepts_invite():
    org = new_org(roles=("OrganizationAdmin",))
    c, u = make_platform_admin()
    d = invite(org.clients["OrganizationAdmin"], org.id, u["email"], "OrganizationAdmin")["data"]
    c.post_json("/api/invites/%s/accept" % d["id"])
    assert psql_value("SELECT role_in_organization FROM organization_memberships"
                      " WHERE organization_id = :'o' AND user_id = :'u'",
                      o=org.id, u=u["id"]) == "OrganizationAdmin"


def test_concurrent_creates_make_one_invite(org):
    from concurrent.futures import ThreadPoolExecutor
    email = unique_email("race")
    clients = [Client() for _ in range(6)]
    for c in clients:
        c.cookies.set("auth.session_token", org.clients["OrganizationAdmin"].session_token)

    def post(c):
        return c.post("/api/organizations/%s/invites" % org.id,
                      json={"email": email, "roleInOrganization": "Coach"}).status_code

    with ThreadPoolExecutor(len(clients)) as ex:
        codes = sorted(ex.map(post, clients))
    assert codes == [200] * 5 + [201], codes
    assert psql_value("SELECT count(*) FROM invites WHERE email = :'e'", e=email) == "1"
