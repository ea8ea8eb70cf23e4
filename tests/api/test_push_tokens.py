"""Device push tokens (docs/api.md "Push tokens"): POST /api/users/me/push-tokens and
DELETE /api/users/me/push-tokens/:token."""
import re
import uuid
from urllib.parse import quote

from helpers import Client, assert_error, psql, psql_value, sign_up
from orgs import new_org
from users_support import add_pending_invite

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def expo_token():
    return "ExponentPushToken[%s]" % uuid.uuid4().hex[:22]


def path(token):
    return "/api/users/me/push-tokens/" + quote(token, safe="")


def test_register_and_delete():
    c, u = sign_up()
    tok = expo_token()
    d = c.post_json("/api/users/me/push-tokens", {"token": tok, "platform": "ios"},
                    expect=201)["data"]
    assert d["token"] == tok and d["platform"] == "ios" and ISO.match(d["createdAt"])
    assert set(d) == {"token", "platform", "createdAt"}
    assert psql_value("SELECT user_id FROM push_tokens WHERE token = :'t'", t=tok) == u["id"]
    # Again: 200, same row (platform may change).
    d2 = c.post_json("/api/users/me/push-tokens", {"token": tok, "platform": "android"})["data"]
    assert d2["createdAt"] == d["createdAt"] and d2["platform"] == "android"
    assert psql_value("SELECT count(*) FROM push_tokens WHERE token = :'t'", t=tok) == "1"
    r = c.delete(path(tok))
    assert r.status_code == 204 and r.content == b""
    assert psql_value("SELECT count(*) FROM push_tokens WHERE token = :'t'", t=tok) == "0"
    assert_error(c.delete(path(tok)), 404, "NOT_FOUND")
    assert_error(c.delete(path("never-registered")), 404, "NOT_FOUND")


def test_same_token_moves_to_the_new_user():
    a, ua = sign_up()
    b, ub = sign_up()
    tok = expo_token()
    a.post_json("/api/users/me/push-tokens", {"token": tok, "platform": "android"}, expect=201)
    b.post_json("/api/users/me/push-tokens", {"token": tok, "platform": "android"}, expect=200)
    assert psql("SELECT user_id FROM push_tokens WHERE token = :'t'", t=tok) == [(ub["id"],)]
    # The previous owner can no longer delete it; the new one can.
    assert_error(a.delete(path(tok)), 404, "NOT_FOUND")
    assert b.delete(path(tok)).status_code == 204


def test_other_token_formats_and_validation():
    c, _ = sign_up()
    for tok, platform in (("fcm:APA91bH-x_y.z" + uuid.uuid4().hex, "android"),
                          (uuid.uuid4().hex * 2, "ios"), ("w" * 255, "web")):
        psql("DELETE FROM push_tokens WHERE token = :'t'", t=tok)
        c.post_json("/api/users/me/push-tokens", {"token": tok, "platform": platform}, expect=201)
        assert c.delete(path(tok)).status_code == 204
    bad = [({}, ["platform", "token"]), ({"token": "", "platform": "ios"}, ["token"]),
           ({"token": "x" * 256, "platform": "ios"}, ["token"]),
           ({"token": "has space", "platform": "ios"}, ["token"]),
           ({"token": "tab\there", "platform": "ios"}, ["token"]),
           ({"token": "ñandú", "platform": "ios"}, ["token"]),
           ({"token": 12, "platform": "ios"}, ["token"]),
           ({"token": expo_token(), "platform": "blackberry"}, ["platform"]),
           ({"token": expo_token(), "platform": None}, ["platform"])]
    for body, want in bad:
        err = assert_error(c.call("POST", "/api/users/me/push-tokens", body)[0], 400,
                           "VALIDATION_ERROR")
        assert sorted(d["field"] for d in err["details"]) == want, body


def test_needs_session_but_no_org_and_passes_the_invite_gate():
    anon = Client()
    assert_error(anon.call("POST", "/api/users/me/push-tokens",
                           {"token": expo_token(), "platform": "ios"})[0], 401, "UNAUTHENTICATED")
    assert_error(anon.delete(path("x")), 401, "UNAUTHENTICATED")
    org = new_org(roles=())
    c, u = sign_up()
    add_pending_invite(u["email"], org.id)
    assert_error(c.get("/api/users"), 403, "INVITE_GATE")
    tok = expo_token()
    c.post_json("/api/users/me/push-tokens", {"token": tok, "platform": "web"}, expect=201)
    assert c.delete(path(tok)).status_code == 204
