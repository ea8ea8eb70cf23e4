"""The caller's organization context (docs/api.md "Current user context"): memberships,
switching the current organization, the active organization; plus the role matrix of every
organization-area endpoint."""
import re
import uuid

import pytest

from helpers import Client, assert_error, psql, psql_value, sign_up
from orgs import ORG_ROLES, Org, make_platform_admin

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def add(org, user, role, **extra):
    body = dict({"userId": user["id"], "roleInOrganization": role}, **extra)
    org.admin.post_json("/api/organizations/%s/users" % org.id, body, expect=201)


def pending_invite(org_id, email):
    psql("INSERT INTO invites (id, organization_id, email, role_in_organization, token_hash,"
         " expires_at) VALUES (:'id', :'org', :'email', 'Teacher', :'h', now() + interval '1 day')",
         id=str(uuid.uuid4()), org=org_id, email=email, h=uuid.uuid4().hex)


# ---- GET /api/me/organizations ---------------------------------------------------------------


def test_my_organizations(make_org):
    a, b, c = make_org(roles=()), make_org(roles=()), make_org(roles=())
    client, u = sign_up()
    add(a, u, "Teacher")
    add(b, u, "Manager", isPrimary=True)
    add(c, u, "Coach")
    c.admin.delete_json("/api/organizations/%s/users/%s" % (c.id, u["id"]))  # disabled: left out
    data = client.get_json("/api/me/organizations")["data"]
    assert set(data) == {"organizations", "currentOrganizationId"}
    assert data["currentOrganizationId"] == a.id  # the first membership became current
    orgs = data["organizations"]
    assert [o["id"] for o in orgs] == [b.id, a.id]  # primary first, then by joinedAt
    o = orgs[0]
    assert set(o) == {"id", "name", "description", "logoUrl", "status", "userRole", "isPrimary",
                      "joinedAt", "createdAt", "updatedAt"}
    assert o["name"] == b.name and o["userRole"] == "Manager" and o["isPrimary"] is True
    assert o["status"] == "active" and o["description"] is None and o["logoUrl"] is None
    assert ISO.match(o["joinedAt"]) and ISO.match(o["createdAt"]) and ISO.match(o["updatedAt"])
    assert orgs[1]["userRole"] == "Teacher" and orgs[1]["isPrimary"] is False


def test_my_organizations_none(sign_up):
    c, _ = sign_up()
    assert c.get_json("/api/me/organizations") == {
        "data": {"organizations": [], "currentOrganizationId": None}}


def test_me_requires_session(client):
    assert_error(client.get("/api/me/organizations"), 401, "UNAUTHENTICATED")
    assert_error(client.get("/api/me/current-organization"), 401, "UNAUTHENTICATED")
    assert_error(client.post("/api/me/switch-organization", json={"organizationId": str(uuid.uuid4())}),
                 401, "UNAUTHENTICATED")


def test_get_routes_are_invite_gate_exempt(make_org):
    org, other = make_org(), make_org(roles=())
    c, u = org.clients["Teacher"], org.users["Teacher"]
    pending_invite(other.id, u["email"])
    assert_error(c.get("/api/organizations/%s/users" % org.id), 403, "INVITE_GATE")
    assert c.get_json("/api/me/organizations")["data"]["organizations"][0]["id"] == org.id
    assert c.get_json("/api/me/current-organization")["data"]["id"] == org.id
    # Switching is a change, not a read: the gate applies.
    assert_error(c.post("/api/me/switch-organization", json={"organizationId": org.id}), 403,
                 "INVITE_GATE")


# ---- POST /api/me/switch-organization --------------------------------------------------------


def test_switch(make_org):
    a, b = make_org(roles=()), make_org(roles=())
    c, u = sign_up()
    add(a, u, "Teacher")
    add(b, u, "OrganizationAdmin")
    assert c.get_json("/api/users/me")["data"]["orgId"] == a.id
    d = c.post_json("/api/me/switch-organization", {"organizationId": b.id})["data"]
    assert d == {"currentOrganizationId": b.id, "role": "OrganizationAdmin"}
    assert psql_value("SELECT current_organization_id FROM users WHERE id = :'id'", id=u["id"]) == b.id
    me = c.get_json("/api/users/me")["data"]
    assert me["orgId"] == b.id and me["role"] == "OrganizationAdmin"
    assert me["currentOrganizationId"] == b.id
    assert c.get_json("/api/me/organizations")["data"]["currentOrganizationId"] == b.id
    d = c.post_json("/api/me/switch-organization", {"organizationId": a.id.upper()})["data"]
    assert d == {"currentOrganizationId": a.id, "role": "Teacher"}


def test_switch_errors(make_org):
    a, b = make_org(roles=()), make_org(roles=())
    c, u = sign_up()
    add(a, u, "Coach")
    add(b, u, "Coach")
    for body in ({}, {"organizationId": "abc"}, {"organizationId": 42}, {"organizationId": None}):
        assert_error(c.post("/api/me/switch-organization", json=body), 400, "VALIDATION_ERROR")
    other = make_org(roles=())
    assert_error(c.post("/api/me/switch-organization", json={"organizationId": other.id}), 403,
                 "FORBIDDEN")
    assert_error(c.post("/api/me/switch-organization", json={"organizationId": str(uuid.uuid4())}),
                 403, "FORBIDDEN")
    b.admin.delete_json("/api/organizations/%s/users/%s" % (b.id, u["id"]))
    assert_error(c.post("/api/me/switch-organization", json={"organizationId": b.id}), 403,
                 "FORBIDDEN")
    assert psql_value("SELECT current_organization_id FROM users WHERE id = :'id'", id=u["id"]) == a.id


def test_switch_global_roles(make_org):
    org = make_org(roles=())
    for role in ("PlatformAdmin", "Owner"):
        c, _ = make_platform_admin(role)
        d = c.post_json("/api/me/switch-organization", {"organizationId": org.id})["data"]
        assert d == {"currentOrganizationId": org.id, "role": role}
        cur = c.get_json("/api/me/current-organization")["data"]
        assert cur["id"] == org.id and cur["userRole"] is None
        assert_error(c.post("/api/me/switch-organization", json={"organizationId": str(uuid.uuid4())}),
                     404, "NOT_FOUND")


# ---- GET /api/me/current-organization --------------------------------------------------------


def test_current_organization(make_org, platform_admin):
    org = make_org()
    org.admin.patch_json("/api/organizations/%s" % org.id,
                         {"description": "d", "settings": {"k": "v"}, "logoUrl": "https://x.example/l.png"})
    c = org.clients["Manager"]
    d = c.get_json("/api/me/current-organization")["data"]
    assert {"id", "name", "description", "logoUrl", "status", "settings", "createdAt", "updatedAt",
            "userRole"} <= set(d)
    assert d["id"] == org.id and d["name"] == org.name and d["description"] == "d"
    assert d["settings"] == {"k": "v"} and d["logoUrl"] == "https://x.example/l.png"
    assert d["status"] == "active" and d["userRole"] == "Manager"
    assert ISO.match(d["createdAt"]) and ISO.match(d["updatedAt"])
    # Header and profile resolve to the same organization here; the header wins when both exist.
    c.org(None)
    assert c.get_json("/api/me/current-organization")["data"]["id"] == org.id
    other = make_org(roles=())
    add(other, org.users["Manager"], "Teacher")
    c.org(other.id)
    d = c.get_json("/api/me/current-organization")["data"]
    assert d["id"] == other.id and d["userRole"] == "Teacher"


def test_current_organization_none(sign_up, platform_admin):
    c, _ = sign_up()
    assert c.get_json("/api/me/current-organization") == {"data": None}
    assert platform_admin[0].get_json("/api/me/current-organization") == {"data": None}


# ---- role matrix ------------------------------------------------------------------------------

CALLERS = ("Teacher", "Coach", "Manager", "OrganizationAdmin", "PlatformAdmin", "Owner", "outsider")
# Expected status per endpoint for each caller, in CALLERS order.
MATRIX = [
    ("GET /api/organizations", (403, 403, 403, 200, 200, 200, 200)),
    ("POST /api/organizations", (403, 403, 403, 403, 201, 201, 403)),
    ("GET /api/organizations/:id", (403, 403, 403, 200, 200, 200, 403)),
    ("PATCH /api/organizations/:id", (403, 403, 403, 200, 200, 200, 403)),
    ("GET /api/organizations/:id/users", (403, 200, 200, 200, 200, 200, 403)),
    ("POST /api/organizations/:id/users", (403, 403, 403, 201, 201, 201, 403)),
    ("PATCH /api/organizations/:id/users/:userId", (403, 403, 403, 200, 200, 200, 403)),
    ("DELETE /api/organizations/:id/users/:userId", (403, 403, 403, 200, 200, 200, 403)),
    ("GET /api/me/organizations", (200, 200, 200, 200, 200, 200, 200)),
    ("POST /api/me/switch-organization", (200, 200, 200, 200, 200, 200, 403)),
    ("GET /api/me/current-organization", (200, 200, 200, 200, 200, 200, 200)),
    ("DELETE /api/organizations/:id", (403, 403, 403, 403, 200, 200, 403)),
]


@pytest.mark.parametrize("caller", CALLERS)
def test_role_matrix(caller, platform_admin):
    """Walks every endpoint of the area as one caller; outsider = the OrganizationAdmin of
    another organization (acting with that organization as its context)."""
    pa = platform_admin[0]
    org = Org(pa)
    target = org.users["Teacher"]["id"]
    if caller in ORG_ROLES:
        c = org.clients[caller]
    elif caller == "PlatformAdmin":
        c = pa
    elif caller == "Owner":
        c = make_platform_admin("Owner")[0]
    else:
        c = Org(pa, roles=("OrganizationAdmin",)).clients["OrganizationAdmin"]
    got = {}
    for endpoint, expected in MATRIX:
        method, path = endpoint.split(" ")
        path = path.replace(":id", org.id).replace(":userId", target)
        body = None
        if endpoint == "POST /api/organizations":
            body = {"name": "Matrix org"}
        elif endpoint == "PATCH /api/organizations/:id":
            body = {"description": "matrix"}
        elif endpoint == "POST /api/organizations/:id/users":
            body = {"userId": sign_up()[1]["id"], "roleInOrganization": "Teacher"}
        elif endpoint == "PATCH /api/organizations/:id/users/:userId":
            body = {"isPrimary": True}
        elif endpoint == "POST /api/me/switch-organization":
            body = {"organizationId": org.id}
        r = c.request(method, path, json=body)
        got[endpoint] = r.status_code
    want = {e: exp[CALLERS.index(caller)] for e, exp in MATRIX}
    assert got == want
