"""The statements of docs/api.md that no area test checked: each test names the section it
checks. The invite gate and the CSRF origin rule are tables, the list query parameters one test
per list (every documented parameter changes the answer; a bad value is 400 naming it), and the
corrected statements (inviting a member, invite-accept's email, POST /api/users's mail, `avatar`
on PATCH /api/users/:id). The rules of "Conventions" that the server is still being brought to
are marked xfail "consistency branch"."""
import json
import os
import uuid

import pytest

from helpers import PASSWORD, Client, assert_error, psql, sign_in, sign_up, unique_email
from ment_fixtures import future, make_mentorship, make_session
from orgs import new_org

DOC = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.json")))
ZERO = "00000000-0000-4000-8000-000000000000"
PNG = b"\x89PNG\r\n\x1a\n" + b"docs-claims" * 50
WRONG = {"currentPassword": "not the password", "newPassword": "another password 1"}


def details_fields(r):
    err = assert_error(r, 400, "VALIDATION_ERROR")
    assert isinstance(err.get("details"), list) and err["details"], err
    return {d["field"] for d in err["details"]}


def assert_bad_query(c, path, field, value):
    """docs/api.md: a bad value of a list's query parameter is 400 with `details` naming it."""
    r = c.get(path, params={field: value})
    assert field in details_fields(r), (path, field, value, r.text)


def ids(items, key="id"):
    return [i[key] for i in items]


@pytest.fixture
def org():
    return new_org()


# ---- Conventions: the CSRF origin rule --------------------------------------------------------

# (headers, served): a state-changing request that carries the session cookie. Served requests
# reach the handler (a wrong current password: 400); refused ones are 403 FORBIDDEN.
ORIGIN_CASES = [
    ({}, True),  # no Origin, no Referer: native apps and servers
    ({"Origin": "http://trusted.example"}, True),
    ({"Origin": "https://evil.example"}, False),
    ({"Origin": "null"}, False),  # sandboxed frames, file:// pages
    ({"Origin": "http://trusted.example:8443"}, False),  # another port is another origin
    ({"Referer": "http://trusted.example/settings?tab=1"}, True),
    ({"Referer": "https://evil.example/page"}, False),
    ({"Referer": "not a url"}, False),
    ({"Origin": "http://trusted.example", "Referer": "https://evil.example/"}, True),  # Origin wins
    ({"Origin": "https://evil.example", "Referer": "http://trusted.example/"}, False),
]


@pytest.mark.parametrize("headers,served", ORIGIN_CASES)
def test_origin_rule_for_cookie_requests(user, headers, served):
    c, _ = user
    r = c.post("/api/users/me/password", json=WRONG, headers=headers)
    if served:
        assert_error(r, 400, "VALIDATION_ERROR")
    else:
        assert_error(r, 403, "FORBIDDEN")


def test_origin_rule_spares_reads_and_cookieless_requests(user):
    c, u = user
    evil = {"Origin": "https://evil.example"}
    # A GET is not state-changing: served whatever its Origin.
    assert c.get("/api/users/me", headers=evil).status_code == 200
    # Without the cookie the rule does not apply: the route's own answer (401 wrong password).
    anon = Client()
    r = anon.post("/api/auth/sign-in/email", json={"email": u["email"], "password": "wrong pw 123"},
                  headers=evil)
    assert_error(r, 401, "UNAUTHENTICATED")
    # A public route called with a cookie is checked like any other.
    r = c.post("/api/auth/sign-in/email", json={"email": u["email"], "password": "wrong pw 123"},
               headers=evil)
    assert_error(r, 403, "FORBIDDEN")


# ---- Invite gate: which routes answer 403 INVITE_GATE -----------------------------------------

GATED = "gated"
PUBLIC = "public"  # no session needed: whatever it answers, never INVITE_GATE

# (method, path, expected): expected is GATED, PUBLIC or the status the exempt route answers.
# "{self}" is the caller's own user id; other ids are well-formed and unknown.
GATE_TABLE = [
    # public routes
    ("POST", "/api/auth/sign-up/email", PUBLIC),
    ("POST", "/api/auth/sign-in/email", PUBLIC),
    ("POST", "/api/auth/forget-password", PUBLIC),
    ("POST", "/api/auth/request-password-reset", PUBLIC),
    ("POST", "/api/auth/resend-activation", PUBLIC),
    ("POST", "/api/auth/send-verification-email", PUBLIC),
    ("GET", "/api/auth/verify-email", PUBLIC),
    ("GET", "/api/invites/{token}", PUBLIC),
    ("POST", "/api/invites/accept", PUBLIC),
    ("POST", "/api/setup/first-run", PUBLIC),
    ("GET", "/api/health", PUBLIC),
    ("GET", "/api/health/live", PUBLIC),
    ("GET", "/api/health/ready", PUBLIC),
    ("GET", "/api/files/local", PUBLIC),
    ("PUT", "/api/files/local", PUBLIC),
    ("GET", "/api/openapi.json", 200),
    ("GET", "/api/docs", PUBLIC),
    ("GET", "/api/docs/{bundle}", PUBLIC),
    ("GET", "/metrics", PUBLIC),
    ("GET", "/api/calendar/{token}.ics", PUBLIC),
    # session routes exempt from the gate
    ("GET", "/api/auth/session", 200),
    ("GET", "/api/auth/get-session", 200),
    ("POST", "/api/auth/reset-password", 400),
    ("GET", "/api/users/me", 200),
    ("GET", "/api/invites/my-pending", 200),
    ("POST", "/api/invites/{id}/accept", 404),
    ("POST", "/api/invites/{id}/decline", 404),
    ("GET", "/api/me/organizations", 200),
    ("GET", "/api/me/current-organization", 200),
    ("POST", "/api/users/me/push-tokens", 201),
    ("DELETE", "/api/users/me/push-tokens/{token}", 404),
    ("POST", "/api/users/me/calendar-feed", 201),
    ("DELETE", "/api/users/me/calendar-feed", 204),
    ("GET", "/api/events/users/me/events", 200),
    ("GET", "/api/events/mentorships/{mentorshipId}/events", 404),
    ("GET", "/api/auth/list-sessions", 200),
    ("POST", "/api/auth/revoke-session", 400),
    ("POST", "/api/auth/revoke-other-sessions", 200),
    # everything else that needs a session
    ("POST", "/api/users/me/password", GATED),
    ("POST", "/api/auth/change-password", GATED),
    ("PATCH", "/api/users/me", GATED),
    ("GET", "/api/users", GATED),
    ("POST", "/api/users", GATED),
    ("GET", "/api/users/{id}", GATED),
    ("PATCH", "/api/users/{id}", GATED),
    ("DELETE", "/api/users/{id}", GATED),
    ("GET", "/api/users/{id}/presence", GATED),
    ("POST", "/api/users/{id}/revoke-sessions", GATED),
    ("DELETE", "/api/users/{id}/two-factor", GATED),
    ("GET", "/api/organizations", GATED),
    ("POST", "/api/organizations", GATED),
    ("GET", "/api/organizations/{id}", GATED),
    ("PATCH", "/api/organizations/{id}", GATED),
    ("DELETE", "/api/organizations/{id}", GATED),
    ("GET", "/api/organizations/{id}/users", GATED),
    ("POST", "/api/organizations/{id}/users", GATED),
    ("PATCH", "/api/organizations/{id}/users/{userId}", GATED),
    ("DELETE", "/api/organizations/{id}/users/{userId}", GATED),
    ("GET", "/api/organizations/{id}/invites", GATED),
    ("POST", "/api/organizations/{id}/invites", GATED),
    ("POST", "/api/me/switch-organization", GATED),
    ("GET", "/api/mentorships", GATED),
    ("POST", "/api/mentorships", GATED),
    ("GET", "/api/mentorships/{id}", GATED),
    ("PATCH", "/api/mentorships/{id}", GATED),
    ("DELETE", "/api/mentorships/{id}", GATED),
    ("GET", "/api/sessions", GATED),
    ("POST", "/api/sessions", GATED),
    ("GET", "/api/sessions/{id}", GATED),
    ("PATCH", "/api/sessions/{id}", GATED),
    ("DELETE", "/api/sessions/{id}", GATED),
    ("GET", "/api/sessions/{id}/video-token", GATED),
    ("POST", "/api/sessions/{id}/reactions", GATED),
    ("GET", "/api/chat/conversations", GATED),
    ("POST", "/api/mentorships/{id}/chat/token", GATED),
    ("GET", "/api/mentorships/{id}/chat/messages", GATED),
    ("POST", "/api/mentorships/{id}/chat/messages", GATED),
    ("PATCH", "/api/mentorships/{id}/chat/messages/{msgId}", GATED),
    ("DELETE", "/api/mentorships/{id}/chat/messages/{msgId}", GATED),
    ("POST", "/api/mentorships/{id}/chat/messages/{msgId}/reactions", GATED),
    ("DELETE", "/api/mentorships/{id}/chat/messages/{msgId}/reactions/{emoji}", GATED),
    ("PATCH", "/api/mentorships/{id}/chat/read-receipt", GATED),
    ("GET", "/api/mentorships/{id}/chat/unread", GATED),
    ("POST", "/api/files/presign", GATED),
    ("POST", "/api/files/register", GATED),
    ("POST", "/api/files/upload", GATED),
    ("GET", "/api/files/{fileId}", GATED),
    ("POST", "/api/files/{fileId}/attach", GATED),
    ("DELETE", "/api/files/{fileId}/attach/{objectType}/{objectId}", GATED),
    ("GET", "/api/files/mentorship/{mentorshipId}/attachments", GATED),
    # two-factor (exempt: routes/two_factor.c); in this order, one setup of the caller
    ("POST", "/api/auth/two-factor/enable", 200),
    ("POST", "/api/auth/two-factor/get-totp-uri", 200),
    ("POST", "/api/auth/two-factor/verify-totp", 401),
    ("POST", "/api/auth/two-factor/verify-backup-code", 401),
    ("POST", "/api/auth/two-factor/generate-backup-codes", 400),
    ("POST", "/api/auth/two-factor/disable", 200),
    # last: they end the session (revoke-sessions every one of the user's, from a session of its
    # own: OWN_SESSION)
    ("POST", "/api/auth/sign-out", 200),
    ("POST", "/api/auth/revoke-sessions", 200),
]

# Rows run with a fresh session of the same user (the table's own one has ended by then).
OWN_SESSION = {("POST", "/api/auth/revoke-sessions")}

BODIES = {
    ("POST", "/api/users/me/password"): WRONG,
    ("POST", "/api/auth/reset-password"): {"token": "x" * 43, "newPassword": "a new password 1"},
    ("POST", "/api/users/me/push-tokens"): {"token": "ExponentPushToken[docs-gate]",
                                            "platform": "ios"},
    ("POST", "/api/setup/first-run"): {},
    ("POST", "/api/auth/two-factor/enable"): {"password": PASSWORD},
    ("POST", "/api/auth/two-factor/get-totp-uri"): {"password": PASSWORD},
    ("POST", "/api/auth/two-factor/verify-totp"): {"code": "000000"},
    ("POST", "/api/auth/two-factor/verify-backup-code"): {"code": "aaaaa-aaaaa"},
    ("POST", "/api/auth/two-factor/generate-backup-codes"): {"password": PASSWORD},
    ("POST", "/api/auth/two-factor/disable"): {"password": PASSWORD},
}


def test_gate_table_names_every_operation():
    documented = {(m.upper(), p) for p, ops in DOC["paths"].items() for m in ops
                  if m in ("get", "post", "put", "patch", "delete")}
    table = {(m, p) for m, p, _ in GATE_TABLE}
    assert documented - table == set(), "operations without a row in GATE_TABLE"


def test_invite_gate_table():
    org = new_org(roles=("OrganizationAdmin",))
    c, u = sign_up()
    org.clients["OrganizationAdmin"].post_json(
        "/api/organizations/%s/invites" % org.id,
        {"email": u["email"], "roleInOrganization": "Teacher"}, expect=201)
    values = {"self": u["id"], "id": ZERO, "userId": u["id"], "mentorshipId": ZERO,
              "fileId": ZERO, "msgId": ZERO, "objectId": ZERO, "objectType": "mentorship",
              "emoji": "%F0%9F%91%8D", "token": "unknown-token",
              "bundle": "redoc.0000000000000000.js"}
    wrong = []
    for method, pattern, expected in GATE_TABLE:
        path = pattern.format(**values)
        body = BODIES.get((method, pattern), {} if method in ("POST", "PATCH", "PUT") else None)
        stream = pattern.startswith("/api/events/")
        who = sign_in(u["email"])[0] if (method, pattern) in OWN_SESSION else c
        r = who.request(method, path, json=body, stream=stream)
        status = r.status_code
        code = None
        if not stream and r.headers.get("Content-Type", "").startswith("application/json"):
            try:
                code = (r.json() or {}).get("error", {}).get("code")
            except (ValueError, AttributeError):
                code = None
        r.close()
        gated = status == 403 and code == "INVITE_GATE"
        if expected == GATED:
            ok = gated
        elif expected == PUBLIC:
            ok = not gated
        else:
            ok = status == expected
        if not ok:
            wrong.append((method, pattern, expected, status, code))
    assert wrong == [], wrong


# ---- Invites: the corrected statements ---------------------------------------------------------


def test_inviting_a_member_is_409_active_or_disabled():
    org = new_org(roles=("OrganizationAdmin", "Coach", "Teacher"))
    admin = org.clients["OrganizationAdmin"]
    path = "/api/organizations/%s/invites" % org.id
    for email in (org.users["Coach"]["email"], org.users["Coach"]["email"].upper()):
        assert_error(admin.post(path, json={"email": email, "roleInOrganization": "Manager"}),
                     409, "CONFLICT")
    admin.delete_json("/api/organizations/%s/users/%s" % (org.id, org.uid("Teacher")))
    assert_error(admin.post(path, json={"email": org.users["Teacher"]["email"],
                                        "roleInOrganization": "Teacher"}), 409, "CONFLICT")
    # someone else is invited as usual
    admin.post_json(path, {"email": unique_email(), "roleInOrganization": "Coach"}, expect=201)


def test_invite_accept_email_compares_case_insensitively():
    org = new_org(roles=("OrganizationAdmin",))
    admin = org.clients["OrganizationAdmin"]
    path = "/api/organizations/%s/invites" % org.id
    email = unique_email("case")
    token = admin.post_json(path, {"email": email, "roleInOrganization": "Coach"},
                            expect=201)["data"]["inviteToken"]
    body = {"token": token, "firstName": "Case", "lastName": "Person", "password": PASSWORD}
    r = Client().post("/api/invites/accept", json=dict(body, email="other-" + email))
    assert details_fields(r) == {"email"}
    d = Client().post_json("/api/invites/accept", dict(body, email=email.upper()))["data"]
    assert d["email"] == email and d["organizationId"] == org.id
    assert d["roleInOrganization"] == "Coach"


# ---- Users: the corrected statements -----------------------------------------------------------


def test_post_users_sends_the_verification_mail(org, mail):
    email = unique_email("created")
    mgr = org.client("Manager")
    d = mgr.post_json("/api/users", {"email": email, "firstName": "Made", "lastName": "ByManager",
                                     "password": PASSWORD}, expect=201)["data"]
    m = mail.wait_for(email)
    link = m.link("/api/auth/verify-email")
    c, _ = sign_in(email)
    assert c.get_json("/api/users/me")["data"]["emailVerified"] is False
    r = Client().get(link[link.index("/api/"):], allow_redirects=False)
    assert r.status_code == 302, r.text
    assert c.get_json("/api/users/me")["data"]["emailVerified"] is True
    assert d["email"] == email


def test_patch_user_by_id_applies_avatar(org):
    teacher = org.client("Teacher")
    r = teacher.post("/api/files/upload", files={"file": ("face.png", PNG, "image/png")})
    assert r.status_code == 201, r.text
    fid = r.json()["data"]["fileId"]
    path = "/api/users/%s" % org.uid("Teacher")
    assert teacher.get_json(path)["data"]["avatarUrl"] is None
    teacher.patch_json(path, {"avatar": fid})
    url = teacher.get_json(path)["data"]["avatarUrl"]
    assert url and url.startswith("http"), url
    assert teacher.get(url[url.index("/api/"):]).content == PNG
    assert details_fields(teacher.patch(path, json={"avatar": "not-a-file-id"})) == {"avatar"}
    teacher.patch_json(path, {"avatar": None})
    assert teacher.get_json(path)["data"]["avatarUrl"] is None


# ---- Conventions: rules every route follows ---------------------------------------------------


# (method, pattern, parameter): a malformed value of `parameter` is 400 naming it.
PATH_ID_ROUTES = [
    ("GET", "/api/organizations/{v}", "id"),
    ("GET", "/api/organizations/{v}/users", "id"),
    ("PATCH", "/api/organizations/%s/users/{v}" % ZERO, "userId"),
    ("GET", "/api/organizations/{v}/invites", "id"),
    ("POST", "/api/invites/{v}/accept", "id"),
    ("GET", "/api/mentorships/{v}", "id"),
    ("GET", "/api/sessions/{v}", "id"),
    ("GET", "/api/sessions/{v}/video-token", "id"),
    ("GET", "/api/mentorships/{v}/chat/messages", "id"),
    ("PATCH", "/api/mentorships/%s/chat/messages/{v}" % ZERO, "msgId"),
    ("GET", "/api/files/{v}", "fileId"),
    ("GET", "/api/files/mentorship/{v}/attachments", "mentorshipId"),
    ("DELETE", "/api/files/%s/attach/mentorship/{v}" % ZERO, "objectId"),
    ("GET", "/api/users/{v}", "id"),
    ("GET", "/api/events/mentorships/{v}/events", "mentorshipId"),
]


@pytest.mark.parametrize("method,pattern,param", PATH_ID_ROUTES)
def test_malformed_path_id_is_400_naming_it(org, method, pattern, param):
    c = org.client("OrganizationAdmin")
    body = {} if method in ("POST", "PATCH") else None
    r = c.request(method, pattern.format(v="not-an-id"), json=body)
    err = assert_error(r, 400, "VALIDATION_ERROR")
    assert err["message"] == "Invalid id", err
    if param == "userId" or pattern.startswith("/api/users/"):
        assert [d["field"] for d in err["details"]] == [param], err
        assert err["details"][0]["message"].startswith("must be a user id (CUID)"), err
    else:
        assert err.get("details") == [{"field": param, "message": "must be a UUID"}], err


def test_well_formed_unknown_path_id_is_404(org):
    c = org.client("OrganizationAdmin")
    for path in ("/api/mentorships/%s" % ZERO, "/api/sessions/%s" % ZERO,
                 "/api/files/%s" % ZERO):
        assert_error(c.get(path), 404, "NOT_FOUND")


def test_one_word_name_round_trips_through_patch_me():
    c, _ = sign_up(name="Cher")
    me = c.get_json("/api/users/me")["data"]
    assert me["firstName"] == "Cher" and me["lastName"] is None
    c.patch_json("/api/users/me", {"firstName": me["firstName"], "lastName": me["lastName"]})
    assert details_fields(c.patch("/api/users/me", json={"firstName": None})) == {"firstName"}


def test_patch_me_applies_avatar(org):
    c = org.client("Coach")
    r = c.post("/api/files/upload", files={"file": ("me.png", PNG, "image/png")})
    assert r.status_code == 201, r.text
    c.patch_json("/api/users/me", {"avatar": r.json()["data"]["fileId"]})
    assert c.get_json("/api/users/me")["data"]["avatarUrl"]


def test_presign_field_errors_carry_details(org):
    c = org.client("Coach")
    r = c.post("/api/files/presign", json={"filename": "a.exe", "mimeType": "application/x-bad",
                                           "sizeBytes": 10})
    assert details_fields(r) == {"mimeType"}


@pytest.mark.parametrize("path", ["/api/mentorships", "/api/sessions"])
def test_every_failing_query_field_at_once(org, path):
    """docs/api.md "Field errors": all failing fields in one answer, paging and filters alike."""
    r = org.client("Manager").get(path, params={"limit": "0", "status": "gone"})
    assert details_fields(r) == {"limit", "status"}


# ---- Query parameters of every list ------------------------------------------------------------


def test_organization_list_query_parameters():
    from orgs import make_platform_admin
    pa, _ = make_platform_admin()
    tag = uuid.uuid4().hex[:10]
    made = [pa.post_json("/api/organizations", {"name": "Docs %s %d" % (tag, i)},
                         expect=201)["data"]["id"] for i in range(3)]
    pa.delete_json("/api/organizations/%s" % made[2])
    q = "/api/organizations"
    page = pa.get_json(q, params={"search": tag.upper()})  # case-insensitive substring
    assert ids(page["data"]) == made and page["meta"]["total_count"] == 3
    assert ids(pa.get_json(q, params={"search": tag, "limit": 1})["data"]) == made[:1]
    assert ids(pa.get_json(q, params={"search": tag, "limit": 1, "offset": 1})["data"]) == made[1:2]
    assert ids(pa.get_json(q, params={"search": tag, "status": "archived"})["data"]) == made[2:]
    assert pa.get_json(q, params={"search": "  %s  " % tag})["meta"]["total_count"] == 3  # trimmed
    assert pa.get_json(q, params={"search": "%" + tag})["meta"]["total_count"] == 0  # % literal
    for field, value in (("limit", "0"), ("limit", "1001"), ("limit", "x"), ("offset", "-1"),
                         ("status", "gone"), ("search", "s" * 201)):
        assert_bad_query(pa, q, field, value)


def test_member_list_query_parameters(org):
    admin = org.client("OrganizationAdmin")
    q = "/api/organizations/%s/users" % org.id
    everyone = admin.get_json(q)
    assert everyone["meta"]["total_count"] == 4
    order = ids(everyone["data"])
    assert ids(admin.get_json(q, params={"limit": 2, "offset": 1})["data"]) == order[1:3]
    assert ids(admin.get_json(q, params={"role": "Coach"})["data"]) == [org.uid("Coach")]
    email = org.users["Teacher"]["email"]
    assert ids(admin.get_json(q, params={"search": email.upper()})["data"]) == [org.uid("Teacher")]
    admin.delete_json("%s/%s" % (q, org.uid("Manager")))
    assert ids(admin.get_json(q, params={"membershipStatus": "disabled"})["data"]) == \
        [org.uid("Manager")]
    psql("UPDATE users SET status = 'suspended' WHERE id = :'id'", id=org.uid("Coach"))
    assert ids(admin.get_json(q, params={"status": "suspended"})["data"]) == [org.uid("Coach")]
    for field, value in (("limit", "0"), ("limit", "1001"), ("offset", "-1"), ("role", "Owner"),
                         ("status", "gone"), ("membershipStatus", "gone"),
                         ("search", "s" * 201)):
        assert_bad_query(admin, q, field, value)


def test_user_list_query_parameters(org):
    mgr = org.client("Manager")
    q = "/api/users"
    everyone = mgr.get_json(q)  # a Manager does not see the OrganizationAdmin
    order = ids(everyone["data"])
    assert everyone["meta"]["total_count"] == 3 and org.uid("OrganizationAdmin") not in order
    assert ids(mgr.get_json(q, params={"limit": 1, "offset": 1})["data"]) == order[1:2]
    assert ids(mgr.get_json(q, params={"role": "Teacher"})["data"]) == [org.uid("Teacher")]
    email = org.users["Coach"]["email"]
    assert ids(mgr.get_json(q, params={"search": email.upper()})["data"]) == [org.uid("Coach")]
    psql("UPDATE users SET status = 'inactive' WHERE id = :'id'", id=org.uid("Teacher"))
    assert ids(mgr.get_json(q, params={"status": "inactive"})["data"]) == [org.uid("Teacher")]
    for field, value in (("limit", "0"), ("limit", "1001"), ("offset", "-1"), ("role", "Owner"),
                         ("status", "gone"), ("search", "s" * 201)):
        assert_bad_query(mgr, q, field, value)


def test_mentorship_list_query_parameters(org):
    org.add_member("Coach", key="Coach2", first="Second")
    org.add_member("Teacher", key="Teacher2", first="Second")
    a = make_mentorship(org, status="active")
    b = make_mentorship(org, coach="Coach2", teacher="Teacher2", status="pending")
    mgr = org.client("Manager")
    q = "/api/mentorships"
    assert ids(mgr.get_json(q)["data"]) == [b["id"], a["id"]]  # newest first
    assert ids(mgr.get_json(q, params={"limit": 1, "offset": 1})["data"]) == [a["id"]]
    assert ids(mgr.get_json(q, params={"status": "pending"})["data"]) == [b["id"]]
    assert ids(mgr.get_json(q, params={"coachId": org.uid("Coach2")})["data"]) == [b["id"]]
    assert ids(mgr.get_json(q, params={"teacherId": org.uid("Teacher")})["data"]) == [a["id"]]
    # a participant always gets their own list: the filters do not widen it
    coach = org.client("Coach")
    assert ids(coach.get_json(q, params={"coachId": org.uid("Coach2")})["data"]) == [a["id"]]
    for field, value in (("limit", "0"), ("limit", "201"), ("offset", "-1"), ("status", "gone")):
        assert_bad_query(mgr, q, field, value)


def test_session_list_query_parameters(org):
    org.add_member("Coach", key="Coach2", first="Second")
    org.add_member("Teacher", key="Teacher2", first="Second")
    m1 = make_mentorship(org)
    m2 = make_mentorship(org, coach="Coach2", teacher="Teacher2")
    s1 = make_session(org, m1["id"], scheduledAt=future(hours=24))["data"]
    s2 = make_session(org, m2["id"], by="Manager", scheduledAt=future(hours=48))["data"]
    s3 = make_session(org, m1["id"], scheduledAt=future(hours=72))["data"]
    mgr = org.client("Manager")
    mgr.delete_json("/api/sessions/%s" % s3["id"])
    q = "/api/sessions"
    assert ids(mgr.get_json(q)["data"]) == [s1["id"], s2["id"], s3["id"]]  # by scheduledAt
    assert ids(mgr.get_json(q, params={"limit": 1, "offset": 1})["data"]) == [s2["id"]]
    assert ids(mgr.get_json(q, params={"status": "cancelled"})["data"]) == [s3["id"]]
    assert ids(mgr.get_json(q, params={"mentorshipId": m2["id"]})["data"]) == [s2["id"]]
    # from / to are inclusive bounds on scheduledAt
    assert ids(mgr.get_json(q, params={"from": s2["scheduledAt"]})["data"]) == [s2["id"], s3["id"]]
    assert ids(mgr.get_json(q, params={"to": s2["scheduledAt"]})["data"]) == [s1["id"], s2["id"]]
    for field, value in (("limit", "0"), ("limit", "201"), ("offset", "-1"), ("status", "gone"),
                         ("mentorshipId", "nope"), ("from", "yesterday"),
                         ("to", "2026-01-01T10:00:00")):  # no zone
        assert_bad_query(mgr, q, field, value)


def test_chat_history_query_parameters(org):
    m = make_mentorship(org)
    coach = org.client("Coach")
    q = "/api/mentorships/%s/chat/messages" % m["id"]
    sent = [coach.post_json(q, {"body": body}, expect=201)["data"]["id"]
            for body in ("first meeting notes", "second note", "third meeting")]
    page = coach.get_json(q, params={"limit": 2})
    assert ids(page["data"]) == sent[:0:-1] and page["meta"]["hasMore"] is True
    rest = coach.get_json(q, params={"limit": 2, "before": page["meta"]["nextCursor"]})
    assert ids(rest["data"]) == sent[:1] and rest["meta"]["hasMore"] is False
    found = coach.get_json(q, params={"q": "meeting"})
    assert ids(found["data"]) == [sent[2], sent[0]] and found["meta"]["nextCursor"] is None
    assert ids(coach.get_json(q, params={"q": "   "})["data"]) == sent[::-1]  # blank: no search
    for field, value in (("limit", "0"), ("limit", "101"), ("before", "last week"),
                         ("q", "w" * 201)):
        assert_bad_query(coach, q, field, value)


def test_lists_without_query_parameters_ignore_them(org):
    """Invites of an organization, the caller's pending invites, conversations, a mentorship's
    attachments and /api/me/organizations take no query parameters; unknown ones are ignored."""
    m = make_mentorship(org)
    noise = {"limit": "oops", "offset": "-5", "status": "nope", "q": "x" * 300}
    for c, path in ((org.client("OrganizationAdmin"), "/api/organizations/%s/invites" % org.id),
                    (org.client("Coach"), "/api/invites/my-pending"),
                    (org.client("Coach"), "/api/chat/conversations"),
                    (org.client("Coach"), "/api/files/mentorship/%s/attachments" % m["id"]),
                    (org.client("Coach"), "/api/me/organizations")):
        # The noise is undocumented on purpose.
        assert c.get_json(path, params=noise, openapi_loose=True) == c.get_json(path), path
