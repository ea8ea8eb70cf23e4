"""The invite gate (docs/api.md "Invite gate"): while a signed-in user has pending, unexpired
invites, protected endpoints answer 403 INVITE_GATE; the exempt session routes (sign-out,
GET /api/users/me, the invitee's invite endpoints, GET /api/me/*) stay usable
(test_docs_claims.py checks the whole list). The gate lifts once
every invite is accepted or declined; an expired invite does not gate."""
import pytest

from helpers import PASSWORD, Client, assert_error, psql, sign_up, unique_email
from orgs import new_org

WRONG = {"currentPassword": "not the password", "newPassword": "another password 1"}


def invite(org, email, role="Teacher"):
    return org.clients["OrganizationAdmin"].post_json(
        "/api/organizations/%s/invites" % org.id,
        {"email": email, "roleInOrganization": role}, expect=201)["data"]


def assert_gated(c):
    assert_error(c.post("/api/users/me/password", json=WRONG), 403, "INVITE_GATE")


def assert_not_gated(c):
    # Past the gate the handler runs: a wrong current password is a validation failure.
    assert_error(c.post("/api/users/me/password", json=WRONG), 400, "VALIDATION_ERROR")


def route_exists(c, method, path):
    r = c.request(method, path)
    return not (r.status_code == 404 and r.json()["error"]["message"] == "Route not found")


@pytest.fixture
def org():
    return new_org(roles=("OrganizationAdmin",))


def test_pending_invite_gates_protected_endpoints(org):
    c, u = sign_up()
    assert_not_gated(c)
    inv = invite(org, u["email"])
    assert_gated(c)
    # Organization endpoints are gated too, even for their own admins.
    admin, admin_user = org.clients["OrganizationAdmin"], org.users["OrganizationAdmin"]
    other = new_org(roles=("OrganizationAdmin",))
    invite(other, admin_user["email"])
    assert_error(admin.get("/api/organizations/%s/invites" % org.id), 403, "INVITE_GATE")
    assert_error(admin.post("/api/organizations/%s/invites" % org.id,
                            json={"email": unique_email(), "roleInOrganization": "Coach"}),
                 403, "INVITE_GATE")

    # Exempt: the account routes, the own profile, the invite endpoints.
    assert c.get_json("/api/auth/session")["user"]["id"] == u["id"]
    me = c.get_json("/api/users/me")["data"]
    assert me["id"] == u["id"]
    pending = c.get_json("/api/invites/my-pending")["data"]
    assert [i["id"] for i in pending] == [inv["id"]]
    assert c.get_json("/api/invites/%s" % inv["inviteToken"])["data"]["isAvailable"]
    # GET /api/me/* (built in another area): never INVITE_GATE where the route exists.
    for path in ("/api/me/organizations", "/api/me/current-organization"):
        if route_exists(c, "GET", path):
            r = c.get(path)
            assert r.status_code == 200, (path, r.text)

    # Declining the only invite lifts the gate.
    c.post_json("/api/invites/%s/decline" % inv["id"])
    assert_not_gated(c)


def test_gate_lifts_only_after_every_invite(org):
    c, u = sign_up()
    other = new_org(roles=("OrganizationAdmin",))
    a = invite(org, u["email"], "Coach")
    b = invite(other, u["email"], "Teacher")
    assert_gated(c)
    c.post_json("/api/invites/%s/accept" % a["id"])
    assert_gated(c)  # one invite still pending
    c.post_json("/api/invites/%s/accept" % b["id"])
    assert_not_gated(c)


def test_expired_invite_does_not_gate(org):
    c, u = sign_up()
    inv = invite(org, u["email"])
    assert_gated(c)
    psql("UPDATE invites SET expires_at = now() - interval '1 second' WHERE id = :'id'",
         id=inv["id"])
    assert_not_gated(c)
    assert c.get_json("/api/invites/my-pending")["data"] == []


def test_sign_out_and_sign_in_while_gated(org):
    c, u = sign_up()
    invite(org, u["email"])
    r = c.post("/api/auth/sign-out")
    assert r.status_code == 200, r.text
    c2 = Client()
    r = c2.post("/api/auth/sign-in/email", json={"email": u["email"], "password": PASSWORD})
    assert r.status_code == 200, r.text
    assert_gated(c2)
    assert c2.get_json("/api/invites/my-pending")["meta"]["total_count"] == 1


def test_invite_to_other_address_does_not_gate(org):
    c, u = sign_up()
    invite(org, unique_email("someone-else"))
    assert_not_gated(c)
