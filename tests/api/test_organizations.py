"""Organizations: list, create, get, update, archive (docs/api.md
"Organizations and members"), with the
role rules: PlatformAdmin and Owner any organization, OrganizationAdmin only their own."""
import re
import uuid

import pytest

from helpers import assert_error, psql_value
from orgs import make_platform_admin

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
ORG_FIELDS = {"id", "name", "description", "logoUrl", "status", "settings", "defaultTimezone",
              "requireTwoFactorForAdmins",
              "createdAt", "updatedAt"}


def org_path(org_id):
    return "/api/organizations/%s" % org_id


def test_create_with_defaults(platform_admin):
    c, _ = platform_admin
    r, body = c.call("POST", "/api/organizations", {"name": "  Acme Coaching  "})
    assert r.status_code == 201, r.text
    o = body["data"]
    assert set(o) == ORG_FIELDS
    uuid.UUID(o["id"])
    assert o["name"] == "Acme Coaching"  # trimmed
    assert o["description"] is None and o["logoUrl"] is None
    assert o["status"] == "active"
    assert o["settings"] == {}
    assert o["defaultTimezone"] == "UTC"
    assert ISO.match(o["createdAt"]) and ISO.match(o["updatedAt"])


def test_create_with_every_field(platform_admin):
    c, _ = platform_admin
    body = {"name": "Full Org", "description": "Teachers helping teachers",
            "logoUrl": "https://cdn.example.com/logo.png", "status": "inactive",
            "settings": {"theme": {"color": "#123456"}, "features": ["chat", "video"], "n": 3},
            "defaultTimezone": "America/New_York"}
    o = c.post_json("/api/organizations", body, expect=201)["data"]
    for k, v in body.items():
        assert o[k] == v, k
    assert c.get_json(org_path(o["id"]))["data"] == o


def test_create_validation(platform_admin):
    c, _ = platform_admin
    err = assert_error(c.post("/api/organizations", json={}), 400, "VALIDATION_ERROR")
    assert [d["field"] for d in err["details"]] == ["name"]
    err = assert_error(c.post("/api/organizations", json={
        "name": "", "logoUrl": "ftp://example.com/x.png", "status": "closed", "settings": [1],
        "defaultTimezone": "Mars/Olympus", "description": 5}), 400, "VALIDATION_ERROR")
    assert {d["field"] for d in err["details"]} == {
        "name", "logoUrl", "status", "settings", "defaultTimezone", "description"}
    assert_error(c.post("/api/organizations", json={"name": "x" * 256}), 400, "VALIDATION_ERROR")
    assert c.post_json("/api/organizations", {"name": "é" * 255}, expect=201)["data"]["name"] == "é" * 255
    for bad in ("not a url", "javascript:alert(1)", "https://", "//cdn.example.com/x.png"):
        assert_error(c.post("/api/organizations", json={"name": "A", "logoUrl": bad}), 400,
                     "VALIDATION_ERROR")
    assert_error(c.post("/api/organizations", json={"name": "A", "defaultTimezone": "x" * 101}),
                 400, "VALIDATION_ERROR")
    assert_error(c.post("/api/organizations", data="{not json",
                        headers={"Content-Type": "application/json"}), 400, "VALIDATION_ERROR")


def test_create_requires_platform_admin(make_org):
    org = make_org()
    for role in ("OrganizationAdmin", "Manager", "Coach", "Teacher"):
        assert_error(org.clients[role].post("/api/organizations", json={"name": "Mine"}), 403,
                     "FORBIDDEN")


def test_create_as_owner():
    c, _ = make_platform_admin("Owner")
    assert c.post_json("/api/organizations", {"name": "Owned"}, expect=201)["data"]["name"] == "Owned"


def test_requires_session(client):
    assert_error(client.get("/api/organizations"), 401, "UNAUTHENTICATED")
    assert_error(client.post("/api/organizations", json={"name": "x"}), 401, "UNAUTHENTICATED")
    assert_error(client.get(org_path(uuid.uuid4())), 401, "UNAUTHENTICATED")


def test_get_rules(make_org, platform_admin):
    org, other = make_org(), make_org()
    admin = org.clients["OrganizationAdmin"]
    o = admin.get_json(org_path(org.id))["data"]
    assert o["id"] == org.id and o["name"] == org.name
    # Another organization: 403 for an OrganizationAdmin, whether it exists or not.
    assert_error(admin.get(org_path(other.id)), 403, "FORBIDDEN")
    assert_error(admin.get(org_path(uuid.uuid4())), 403, "FORBIDDEN")
    # Lower roles of the organization itself: 403.
    for role in ("Manager", "Coach", "Teacher"):
        assert_error(org.clients[role].get(org_path(org.id)), 403, "FORBIDDEN")
    # PlatformAdmin: any organization, 404 when missing.
    pa = platform_admin[0]
    assert pa.get_json(org_path(other.id))["data"]["id"] == other.id
    assert_error(pa.get(org_path(uuid.uuid4())), 404, "NOT_FOUND")
    # A malformed id is a validation failure.
    assert_error(pa.get(org_path("not-a-uuid")), 400, "VALIDATION_ERROR")
    assert_error(admin.get(org_path("123")), 400, "VALIDATION_ERROR")
    # Upper-case UUIDs are the same id.
    assert pa.get_json(org_path(org.id.upper()))["data"]["id"] == org.id


def test_org_admin_of_another_org_uses_membership_of_target(make_org):
    """The role that counts is the one held in :id, not in the active organization."""
    a, b = make_org(), make_org(roles=())
    c, u = a.clients["Teacher"], a.users["Teacher"]
    b.admin.post_json("/api/organizations/%s/users" % b.id,
                      {"userId": u["id"], "roleInOrganization": "OrganizationAdmin"}, expect=201)
    # Active organization A (Teacher there), acting on B where they are OrganizationAdmin.
    assert c.get_json(org_path(b.id))["data"]["id"] == b.id
    assert_error(c.get(org_path(a.id)), 403, "FORBIDDEN")
    listed = [o["id"] for o in c.get_json("/api/organizations")["data"]]
    assert listed == [b.id]


def test_list_as_platform_admin_search_status_paging(platform_admin):
    c, _ = platform_admin
    tag = uuid.uuid4().hex[:10]
    made = []
    for i, status in enumerate(("active", "inactive", "suspended", "active", "archived")):
        made.append(c.post_json("/api/organizations", {
            "name": "Paging %s %d" % (tag.upper(), i), "status": status}, expect=201)["data"])
    body = c.get_json("/api/organizations?search=%s" % tag)  # case-insensitive
    assert body["meta"]["total_count"] == 5
    assert [o["id"] for o in body["data"]] == [o["id"] for o in made]  # creation order
    assert set(body["data"][0]) == ORG_FIELDS
    page = c.get_json("/api/organizations?search=%s&limit=2&offset=1" % tag)
    assert page["meta"]["total_count"] == 5
    assert [o["id"] for o in page["data"]] == [made[1]["id"], made[2]["id"]]
    act = c.get_json("/api/organizations?search=%s&status=active" % tag)
    assert act["meta"]["total_count"] == 2
    assert all(o["status"] == "active" for o in act["data"])
    beyond = c.get_json("/api/organizations?search=%s&offset=10" % tag)
    assert beyond == {"data": [], "meta": {"total_count": 5}}
    # Partial match in the middle, and LIKE wildcards are literal.
    assert c.get_json("/api/organizations?search=%s 3" % tag[3:].upper())["meta"]["total_count"] == 1
    assert c.get_json("/api/organizations?search=%s%%25" % tag)["meta"]["total_count"] == 0
    assert c.get_json("/api/organizations?search=_aging %s" % tag)["meta"]["total_count"] == 0
    # Without filters PlatformAdmin sees every organization.
    total = int(psql_value("SELECT count(*) FROM organizations"))
    assert c.get_json("/api/organizations?limit=1")["meta"]["total_count"] >= total


def test_list_validation(platform_admin):
    c, _ = platform_admin
    for q in ("limit=0", "limit=1001", "limit=abc", "limit=1.5", "offset=-1", "offset=x",
              "status=deleted"):
        assert_error(c.get("/api/organizations?" + q), 400, "VALIDATION_ERROR")
    assert len(c.get_json("/api/organizations?limit=1000&offset=0")["data"]) <= 1000


def test_list_as_org_admin_only_own(make_org):
    a, b = make_org(), make_org()
    body = a.clients["OrganizationAdmin"].get_json("/api/organizations")
    assert [o["id"] for o in body["data"]] == [a.id]
    assert body["meta"]["total_count"] == 1
    body = a.clients["OrganizationAdmin"].get_json("/api/organizations?search=" + b.name)
    assert body == {"data": [], "meta": {"total_count": 0}}
    for role in ("Manager", "Coach", "Teacher"):
        assert_error(a.clients[role].get("/api/organizations"), 403, "FORBIDDEN")


def test_list_without_any_role(sign_up):
    c, _ = sign_up()
    assert_error(c.get("/api/organizations"), 403, "FORBIDDEN")


def test_patch_fields(make_org):
    org = make_org()
    admin = org.clients["OrganizationAdmin"]
    before = admin.get_json(org_path(org.id))["data"]
    patch = {"name": "Renamed", "description": "About us", "logoUrl": "http://img.example.org/l.svg",
             "settings": {"a": 1}, "defaultTimezone": "Europe/Madrid", "status": "suspended"}
    o = admin.patch_json(org_path(org.id), patch)["data"]
    for k, v in patch.items():
        assert o[k] == v, k
    assert o["createdAt"] == before["createdAt"] and o["updatedAt"] >= before["updatedAt"]
    # Partial update keeps the rest; null clears nullable fields; settings are replaced whole.
    o = admin.patch_json(org_path(org.id), {"description": None, "settings": {"b": [1, 2]}})["data"]
    assert o["description"] is None and o["name"] == "Renamed" and o["settings"] == {"b": [1, 2]}
    assert o["logoUrl"] == "http://img.example.org/l.svg"
    o = admin.patch_json(org_path(org.id), {"logoUrl": None})["data"]
    assert o["logoUrl"] is None
    # An empty body changes nothing.
    assert admin.patch_json(org_path(org.id), {})["data"]["name"] == "Renamed"
    assert org.admin.get_json(org_path(org.id))["data"]["defaultTimezone"] == "Europe/Madrid"


def test_patch_validation(make_org):
    org = make_org()
    admin = org.clients["OrganizationAdmin"]
    for body in ({"name": ""}, {"name": None}, {"name": "x" * 256}, {"status": "gone"},
                 {"defaultTimezone": "Nowhere/City"}, {"defaultTimezone": None},
                 {"logoUrl": "mailto:a@b.c"}, {"settings": "x"}, {"settings": 3}):
        assert_error(admin.patch(org_path(org.id), json=body), 400, "VALIDATION_ERROR")


def test_patch_rules(make_org, platform_admin):
    org, other = make_org(), make_org()
    assert_error(org.clients["OrganizationAdmin"].patch(org_path(other.id), json={"name": "x"}),
                 403, "FORBIDDEN")
    for role in ("Manager", "Coach", "Teacher"):
        assert_error(org.clients[role].patch(org_path(org.id), json={"name": "x"}), 403, "FORBIDDEN")
    pa = platform_admin[0]
    assert pa.patch_json(org_path(other.id), {"name": "By PA"})["data"]["name"] == "By PA"
    assert_error(pa.patch(org_path(uuid.uuid4()), json={"name": "x"}), 404, "NOT_FOUND")
    assert_error(pa.patch(org_path("nope"), json={"name": "x"}), 400, "VALIDATION_ERROR")
    # The forbidden write did not happen.
    assert pa.get_json(org_path(other.id))["data"]["name"] == "By PA"


def test_delete_archives(make_org, platform_admin):
    org = make_org()
    pa = platform_admin[0]
    o = pa.delete_json(org_path(org.id))["data"]
    assert o["id"] == org.id and o["status"] == "archived"
    assert psql_value("SELECT status FROM organizations WHERE id = :'id'", id=org.id) == "archived"
    # The record stays readable.
    assert pa.get_json(org_path(org.id))["data"]["status"] == "archived"
    assert_error(pa.delete(org_path(uuid.uuid4())), 404, "NOT_FOUND")
    assert_error(pa.delete(org_path("x")), 400, "VALIDATION_ERROR")


def test_delete_requires_platform_admin(make_org):
    org = make_org()
    for role in ("OrganizationAdmin", "Manager", "Coach", "Teacher"):
        assert_error(org.clients[role].delete(org_path(org.id)), 403, "FORBIDDEN")
    assert psql_value("SELECT status FROM organizations WHERE id = :'id'", id=org.id) == "active"


def test_owner_any_org(make_org):
    org = make_org()
    owner, _ = make_platform_admin("Owner")
    assert owner.get_json(org_path(org.id))["data"]["id"] == org.id
    assert owner.patch_json(org_path(org.id), {"description": "o"})["data"]["description"] == "o"
    assert owner.delete_json(org_path(org.id))["data"]["status"] == "archived"


def test_invite_gate_applies(make_org, psql):
    org = make_org()
    admin, u = org.clients["OrganizationAdmin"], org.users["OrganizationAdmin"]
    other = make_org(roles=())
    psql("INSERT INTO invites (id, organization_id, email, role_in_organization, token_hash,"
         " expires_at) VALUES (:'id', :'org', :'email', 'Teacher', :'h', now() + interval '1 day')",
         id=str(uuid.uuid4()), org=other.id, email=u["email"], h=uuid.uuid4().hex)
    assert_error(admin.get(org_path(org.id)), 403, "INVITE_GATE")
    assert_error(admin.get("/api/organizations"), 403, "INVITE_GATE")


@pytest.mark.parametrize("header", ["bad", str(uuid.uuid4())])
def test_bad_org_header(make_org, header):
    """X-Organization-Id is still checked on these routes (docs/api.md "Organization context")."""
    org = make_org()
    c = org.clients["OrganizationAdmin"]
    r = c.get(org_path(org.id), headers={"X-Organization-Id": header})
    assert_error(r, 400 if header == "bad" else 403)
