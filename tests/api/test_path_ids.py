"""Path parameters follow one rule on every route (docs/api.md "Errors"):

- a malformed id (UUID parameters; user ids are CUIDs, and `me` where the users by-id routes
  take it) is 400 VALIDATION_ERROR, message "Invalid id", details [{"field": <the parameter's
  name in the route pattern>, "message": ...}];
- a parameter that is not an id (an invite or push token, an emoji, an object type) that
  breaks its own rule is 400 VALIDATION_ERROR with details naming it too;
- a well-formed id (or token) that names nothing the caller may see is 404 NOT_FOUND;
- the path is checked before the body: a route that also takes a body answers about the path
  even when the body is wrong as well.

The table below has one row per route with a path parameter; test_every_route_is_listed reads
the route tables of routes/*.c, so a new route with a parameter fails until it has its row."""
import glob
import os
import re
import uuid

import pytest

from helpers import ROOT, assert_error

UNKNOWN_UUID = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"
UNKNOWN_CUID = "c" + "0" * 8 + "zzzzzzzzzzzzzzzz"
UNKNOWN_TOKEN = "A" * 43
UNKNOWN_PUSH = "ExponentPushToken[no-such-device]"

# Per parameter kind: a malformed value (percent-encoded where it needs to be), the detail
# message it gets, the top-level message, and a well-formed value that names nothing.
KINDS = {
    "uuid": ("not-a-uuid", "must be a UUID", "Invalid id", UNKNOWN_UUID),
    "cuid": ("not-a-user-id", "must be a user id (CUID)", "Invalid id", UNKNOWN_CUID),
    "user": ("not-a-user-id", "must be a user id (CUID) or me", "Invalid id", UNKNOWN_CUID),
    "invite_token": ("too-short", None, "Invalid path parameter", UNKNOWN_TOKEN),
    "push_token": ("two%20words", "must be 1 to 255 visible ASCII characters",
                   "Invalid path parameter", UNKNOWN_PUSH),
    "emoji": ("way-too-long-emoji", "must be 1 to 8 characters without spaces",
              "Invalid path parameter", "%F0%9F%91%8D"),
    "object_type": ("session", "must be mentorship", "Invalid path parameter", "mentorship"),
}

# (method, route pattern) -> (kind of each parameter in pattern order, a body that is itself
# invalid for routes that take one, or None).
ROUTES = {
    ("POST", "/api/mentorships/:id/chat/token"): (["uuid"], None),
    ("GET", "/api/mentorships/:id/chat/messages"): (["uuid"], None),
    ("POST", "/api/mentorships/:id/chat/messages"): (["uuid"], {"body": ""}),
    ("PATCH", "/api/mentorships/:id/chat/messages/:msgId"): (["uuid", "uuid"], {"body": ""}),
    ("DELETE", "/api/mentorships/:id/chat/messages/:msgId"): (["uuid", "uuid"], None),
    ("POST", "/api/mentorships/:id/chat/messages/:msgId/reactions"):
        (["uuid", "uuid"], {"emoji": ""}),
    ("DELETE", "/api/mentorships/:id/chat/messages/:msgId/reactions/:emoji"):
        (["uuid", "uuid", "emoji"], None),
    ("PATCH", "/api/mentorships/:id/chat/read-receipt"): (["uuid"], {"lastReadMessageId": 1}),
    ("GET", "/api/mentorships/:id/chat/unread"): (["uuid"], None),
    ("GET", "/api/events/mentorships/:mentorshipId/events"): (["uuid"], None),
    ("GET", "/api/files/:fileId"): (["uuid"], None),
    ("POST", "/api/files/:fileId/attach"): (["uuid"], {"objectType": 5}),
    ("DELETE", "/api/files/:fileId/attach/:objectType/:objectId"):
        (["uuid", "object_type", "uuid"], None),
    ("GET", "/api/files/mentorship/:mentorshipId/attachments"): (["uuid"], None),
    ("GET", "/api/organizations/:id/invites"): (["uuid"], None),
    ("POST", "/api/organizations/:id/invites"): (["uuid"], {"email": "nope"}),
    ("GET", "/api/invites/:token"): (["invite_token"], None),
    ("POST", "/api/invites/:id/accept"): (["uuid"], None),
    ("POST", "/api/invites/:id/decline"): (["uuid"], None),
    ("GET", "/api/mentorships/:id"): (["uuid"], None),
    ("PATCH", "/api/mentorships/:id"): (["uuid"], {"status": "nope"}),
    ("DELETE", "/api/mentorships/:id"): (["uuid"], None),
    ("GET", "/api/organizations/:id"): (["uuid"], None),
    ("PATCH", "/api/organizations/:id"): (["uuid"], {"name": ""}),
    ("DELETE", "/api/organizations/:id"): (["uuid"], None),
    ("GET", "/api/organizations/:id/users"): (["uuid"], None),
    ("POST", "/api/organizations/:id/users"): (["uuid"], {"roleInOrganization": "Nope"}),
    ("PATCH", "/api/organizations/:id/users/:userId"):
        (["uuid", "cuid"], {"roleInOrganization": "Nope"}),
    ("DELETE", "/api/organizations/:id/users/:userId"): (["uuid", "cuid"], None),
    ("DELETE", "/api/users/me/push-tokens/:token"): (["push_token"], None),
    ("GET", "/api/calendar/:token.ics"): (["invite_token"], None),
    ("GET", "/api/sessions/:id"): (["uuid"], None),
    ("PATCH", "/api/sessions/:id"): (["uuid"], {"status": "nope"}),
    ("DELETE", "/api/sessions/:id"): (["uuid"], None),
    ("GET", "/api/sessions/:id/video-token"): (["uuid"], None),
    ("POST", "/api/sessions/:id/reactions"): (["uuid"], {"emoji": "nope"}),
    ("GET", "/api/users/:id"): (["user"], None),
    ("PATCH", "/api/users/:id"): (["user"], {"firstName": ""}),
    ("DELETE", "/api/users/:id"): (["user"], None),
    ("GET", "/api/users/:id/presence"): (["user"], None),
    ("POST", "/api/users/:id/revoke-sessions"): (["user"], None),
    ("DELETE", "/api/users/:id/two-factor"): (["user"], None),
}

# Routes whose parameter names a file, not a resource: any name but the real one is 404.
STATIC = {("GET", "/api/docs/:bundle")}

ROUTE_ROW = re.compile(r'\{\s*HTTP_M_(GET|POST|PUT|PATCH|DELETE),\s*"([^"]*)"')


def routes_with_params():
    found = set()
    for path in glob.glob(os.path.join(ROOT, "routes", "*.c")):
        for method, pattern in ROUTE_ROW.findall(open(path, encoding="utf-8").read()):
            if "/:" in pattern and (method, pattern) not in STATIC:
                found.add((method, pattern))
    return found


def param_names(pattern):
    return re.findall(r":(\w+)", pattern)


def fill(pattern, values):
    it = iter(values)
    return re.sub(r":\w+", lambda m: next(it), pattern)


@pytest.fixture(scope="module")
def caller():
    """A PlatformAdmin acting in an organization of its own: it passes every route's guard,
    so each answer below is the handler's."""
    from orgs import make_platform_admin, new_org
    c, _ = make_platform_admin()
    org = new_org(roles=())
    c.org(org.id)
    yield c
    c.close()


def test_every_route_is_listed():
    assert routes_with_params() == set(ROUTES), (
        "routes with path parameters and the table of this test differ: %s" %
        sorted(routes_with_params() ^ set(ROUTES)))


def test_a_static_file_parameter_is_404_whatever_its_spelling(caller):
    for name in ("redoc.0000000000000000.js", "not a file", "..%2Fmain.c"):
        assert_error(caller.get("/api/docs/" + name), 404, "NOT_FOUND")


CASES = [(m, p, i) for (m, p), (kinds, _) in sorted(ROUTES.items()) for i in range(len(kinds))]


@pytest.mark.parametrize("method,pattern,i", CASES,
                         ids=["%s %s %s" % (m, p, param_names(p)[i]) for m, p, i in CASES])
def test_malformed_parameter_is_400_with_details(caller, method, pattern, i):
    kinds, body = ROUTES[(method, pattern)]
    values = [KINDS[k][3] for k in kinds]
    values[i] = KINDS[kinds[i]][0]
    kw = {"json": body} if body is not None else {}
    r = caller.request(method, fill(pattern, values), **kw)
    err = assert_error(r, 400, "VALIDATION_ERROR")
    name = param_names(pattern)[i]
    _, detail, top, _ = KINDS[kinds[i]]
    assert err["message"] == top, err
    assert len(err.get("details", [])) == 1 and err["details"][0]["field"] == name, err
    if detail:
        assert err["details"][0]["message"] == detail, err


ALL = sorted(ROUTES)


@pytest.mark.parametrize("method,pattern", ALL, ids=["%s %s" % k for k in ALL])
def test_well_formed_unknown_is_404(caller, method, pattern):
    kinds, _ = ROUTES[(method, pattern)]
    r = caller.request(method, fill(pattern, [KINDS[k][3] for k in kinds]),
                       **valid_body(method, pattern))
    assert_error(r, 404, "NOT_FOUND")


WITH_BODY = [k for k in ALL if ROUTES[k][1] is not None]


@pytest.mark.parametrize("method,pattern", WITH_BODY, ids=["%s %s" % k for k in WITH_BODY])
def test_wrong_body_alone_names_a_body_field(caller, method, pattern):
    """The bodies of the table are wrong by themselves (so the malformed-id cases above show
    that the path is checked first): with well-formed ids they get a 400 about the body."""
    kinds, body = ROUTES[(method, pattern)]
    r = caller.request(method, fill(pattern, [KINDS[k][3] for k in kinds]), json=body)
    err = assert_error(r, 400, "VALIDATION_ERROR")
    fields = {d["field"] for d in err.get("details", [])}
    assert set(body) <= fields and not fields & set(param_names(pattern)), err


def valid_body(method, pattern):
    """A body each route with one accepts, so the answer is about the id alone."""
    bodies = {
        ("POST", "/api/mentorships/:id/chat/messages"): {"body": "hello"},
        ("PATCH", "/api/mentorships/:id/chat/messages/:msgId"): {"body": "edited"},
        ("POST", "/api/mentorships/:id/chat/messages/:msgId/reactions"): {"emoji": "\U0001F44D"},
        ("PATCH", "/api/mentorships/:id/chat/read-receipt"): {"lastReadMessageId": UNKNOWN_UUID},
        ("POST", "/api/files/:fileId/attach"): {"objectType": "mentorship",
                                                "objectId": UNKNOWN_UUID},
        ("POST", "/api/organizations/:id/invites"): {"email": "%s@example.com" % uuid.uuid4().hex,
                                                     "roleInOrganization": "Coach"},
        ("PATCH", "/api/mentorships/:id"): {"status": "paused"},
        ("PATCH", "/api/organizations/:id"): {"name": "Renamed"},
        ("POST", "/api/organizations/:id/users"): {"userId": UNKNOWN_CUID,
                                                   "roleInOrganization": "Coach"},
        ("PATCH", "/api/organizations/:id/users/:userId"): {"roleInOrganization": "Coach"},
        ("PATCH", "/api/sessions/:id"): {"notes": "Agenda"},
        ("POST", "/api/sessions/:id/reactions"): {"emoji": "\U0001F44D"},
        ("PATCH", "/api/users/:id"): {"firstName": "Renamed"},
    }
    b = bodies.get((method, pattern))
    return {"json": b} if b is not None else {}


def test_me_and_upper_case_ids(caller):
    """`me` names the caller on the users by-id routes; an upper-case UUID is the same id."""
    me = caller.get_json("/api/users/me")["data"]["id"]
    assert caller.get_json("/api/users/me")["data"]["id"] == me
    assert caller.get_json("/api/users/%s" % me)["data"]["id"] == me
    assert_error(caller.get("/api/organizations/%s" % UNKNOWN_UUID.upper()), 404, "NOT_FOUND")
    # `me` is not a user id where the route names another user.
    org = caller.headers["X-Organization-Id"]
    err = assert_error(caller.delete("/api/organizations/%s/users/me" % org), 400,
                       "VALIDATION_ERROR")
    assert err["details"][0]["field"] == "userId", err
