"""Account authentication: sign-up, sign-in, sign-out, session, the session cookie, the CSRF
origin check and CORS (docs/api.md "Authentication" and
"Cross-site requests: the Origin rule")."""
import hashlib
import re

from helpers import (PASSWORD, Client, assert_error, psql, psql_value, sign_in, sign_up,
                     unique_email)

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def cookie_header(r):
    return r.headers.get("Set-Cookie", "")


def test_sign_up_returns_user_session_and_cookie():
    email = unique_email("Mixed.Case")
    c = Client()
    r = c.post("/api/auth/sign-up/email",
               json={"email": email.upper(), "password": PASSWORD, "name": "Grace Brewster Hopper"})
    assert r.status_code == 200, r.text
    body = r.json()
    u, s = body["user"], body["session"]
    assert u["email"] == email.lower()
    assert u["name"] == "Grace Brewster Hopper"
    assert u["emailVerified"] is False
    assert ISO.match(u["createdAt"])
    assert re.match(r"^c[0-9a-z]{24}$", u["id"]), u["id"]
    assert s["userId"] == u["id"] and ISO.match(s["expiresAt"])
    sc = cookie_header(r)
    assert sc.startswith("auth.session_token=")
    for attr in ("HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=604800"):
        assert attr in sc, sc
    assert "Secure" not in sc  # development
    token = c.cookies.get("auth.session_token")
    assert len(token) >= 43
    # The name is split at the first space; only the token's hash is stored.
    row = psql("SELECT first_name, last_name, preferred_language FROM users WHERE id = :'id'",
               id=u["id"])[0]
    assert row == ("Grace", "Brewster Hopper", "en")
    stored = psql_value("SELECT token_hash FROM sessions WHERE id = :'id'", id=s["id"])
    assert stored == hashlib.sha256(token.encode()).hexdigest()
    assert psql_value("SELECT count(*) FROM sessions WHERE token_hash = :'t'", t=token) == "0"
    # The password is stored as argon2id with its parameters.
    h = psql_value("SELECT password_hash FROM accounts WHERE user_id = :'id'", id=u["id"])
    assert h.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    # Signed in right away.
    me = c.get_json("/api/users/me")["data"]
    assert me["id"] == u["id"] and me["email"] == email.lower()


def test_sign_up_validation_errors():
    c = Client()
    err = assert_error(c.post("/api/auth/sign-up/email", json={}), 400, "VALIDATION_ERROR")
    assert {d["field"] for d in err["details"]} == {"email", "password", "name"}
    err = assert_error(c.post("/api/auth/sign-up/email",
                              json={"email": unique_email(), "password": "1234567", "name": "A B"}),
                       400, "VALIDATION_ERROR")
    assert [d["field"] for d in err["details"]] == ["password"]
    assert_error(c.post("/api/auth/sign-up/email",
                        json={"email": "nope@", "password": PASSWORD, "name": "A B"}), 400)
    assert_error(c.post("/api/auth/sign-up/email",
                        json={"email": unique_email(), "password": PASSWORD, "name": "A B",
                              "preferredLanguage": "fr"}), 400)
    assert_error(c.post("/api/auth/sign-up/email",
                        json={"email": unique_email(), "password": "x" * 129, "name": "A B"}), 400)
    # Malformed JSON and non-object bodies.
    assert_error(c.post("/api/auth/sign-up/email", data="{nope",
                        headers={"Content-Type": "application/json"}), 400, "VALIDATION_ERROR")
    assert_error(c.post("/api/auth/sign-up/email", json=[1, 2]), 400, "VALIDATION_ERROR")
    # Passwords count code points, not bytes: 8 two-byte characters are enough.
    sign_up(password="ññññññññ")


def test_sign_up_duplicate_email_is_409_case_insensitive():
    email = unique_email("dup")
    sign_up(email=email)
    r = Client().post("/api/auth/sign-up/email",
                      json={"email": email.upper(), "password": PASSWORD, "name": "Again"})
    assert_error(r, 409, "EMAIL_TAKEN")


def test_sign_up_language_resolution():
    _, u1 = sign_up(lang="es")
    assert psql_value("SELECT preferred_language FROM users WHERE id = :'id'", id=u1["id"]) == "es"
    c = Client()
    c.headers["Accept-Language"] = "es-MX,es;q=0.9,en;q=0.5"
    _, u2 = sign_up(client=c)
    assert psql_value("SELECT preferred_language FROM users WHERE id = :'id'", id=u2["id"]) == "es"
    c = Client()
    c.headers["Accept-Language"] = "de-DE,fr;q=0.8"
    _, u3 = sign_up(client=c)
    assert psql_value("SELECT preferred_language FROM users WHERE id = :'id'", id=u3["id"]) == "en"


def test_sign_in_and_errors():
    email = unique_email("signin")
    sign_up(email=email)
    c, data = sign_in(email.upper())
    assert data["user"]["email"] == email
    assert data["session"]["userId"] == data["user"]["id"]
    assert c.session_token
    wrong = Client().post("/api/auth/sign-in/email", json={"email": email, "password": "wrong-pass"})
    unknown = Client().post("/api/auth/sign-in/email",
                            json={"email": unique_email("ghost"), "password": "wrong-pass"})
    e1 = assert_error(wrong, 401, "UNAUTHENTICATED")
    e2 = assert_error(unknown, 401, "UNAUTHENTICATED")
    assert e1 == e2, "no user enumeration through messages"
    assert "Set-Cookie" not in wrong.headers
    err = assert_error(Client().post("/api/auth/sign-in/email", json={"email": email}), 400)
    assert [d["field"] for d in err["details"]] == ["password"]


def test_inactive_user_cannot_sign_in_and_sessions_stop():
    email = unique_email("suspended")
    c, u = sign_up(email=email)
    c.get_json("/api/users/me")
    psql("UPDATE users SET status = 'suspended' WHERE id = :'id'", id=u["id"])
    assert_error(c.get("/api/users/me"), 401, "UNAUTHENTICATED")
    assert_error(Client().post("/api/auth/sign-in/email",
                               json={"email": email, "password": PASSWORD}), 401)
    assert c.get_json("/api/auth/session") == {"session": None, "user": None}


def test_get_session():
    assert Client().get_json("/api/auth/session") == {"session": None, "user": None}
    c, u = sign_up(name="Solo")
    s = c.get_json("/api/auth/session")
    assert s["user"] == {"id": u["id"], "email": u["email"], "name": "Solo",
                         "emailVerified": False, "createdAt": u["createdAt"]}
    assert s["session"]["userId"] == u["id"] and ISO.match(s["session"]["expiresAt"])
    # A garbage cookie is just "no session".
    bad = Client()
    bad.cookies.set("auth.session_token", "x" * 43)
    assert bad.get_json("/api/auth/session")["session"] is None


def test_sign_out_ends_session_and_clears_cookie():
    c, _ = sign_up()
    token = c.session_token
    r = c.post("/api/auth/sign-out")
    assert r.status_code == 200, r.text
    assert r.json() == {"success": True}
    assert "auth.session_token=;" in r.headers["Set-Cookie"] and "Max-Age=0" in r.headers["Set-Cookie"]
    replay = Client()
    replay.cookies.set("auth.session_token", token)
    assert_error(replay.get("/api/users/me"), 401)
    assert_error(replay.post("/api/auth/sign-out"), 401)
    assert_error(Client().post("/api/auth/sign-out"), 401, "UNAUTHENTICATED")


def test_users_me_profile_record():
    c, u = sign_up(name="Ana Lopez", lang="es")
    d = c.get_json("/api/users/me")["data"]
    for key in ("id", "email", "status", "globalRole", "preferredLanguage", "firstName", "lastName",
                "phone", "birthDate", "countryCode", "timezone", "avatarUrl",
                "currentOrganizationId", "role", "orgId"):
        assert key in d, key
    assert d["status"] == "active" and d["globalRole"] is None and d["role"] is None
    assert d["firstName"] == "Ana" and d["lastName"] == "Lopez" and d["preferredLanguage"] == "es"
    assert d["orgId"] is None and d["currentOrganizationId"] is None
    assert_error(Client().get("/api/users/me"), 401, "UNAUTHENTICATED")


def test_organization_header_rules():
    c, _ = sign_up()
    err = assert_error(c.get("/api/users/me", headers={"X-Organization-Id": "not-a-uuid"}), 400)
    assert [d["field"] for d in err["details"]] == ["X-Organization-Id"], err
    assert_error(c.get("/api/users/me",
                       headers={"X-Organization-Id": "7b0c6b3e-3a52-4f55-9a1e-0d0c43f0a1b2"}), 403)


def test_csrf_origin_check_and_cors():
    c, _ = sign_up()
    r = c.post("/api/auth/sign-out", headers={"Origin": "https://evil.example"})
    assert_error(r, 403, "FORBIDDEN")
    r = c.post("/api/auth/sign-out", headers={"Referer": "https://evil.example/page"})
    assert_error(r, 403)
    # Trusted origins pass and get credentialed CORS.
    r = c.post("/api/auth/sign-out", headers={"Origin": "http://trusted.example"})
    assert r.status_code == 200, r.text
    assert r.headers["Access-Control-Allow-Origin"] == "http://trusted.example"
    assert r.headers["Access-Control-Allow-Credentials"] == "true"
    assert "Origin" in r.headers["Vary"]
    pre = Client().options("/api/auth/sign-in/email",
                           headers={"Origin": "http://trusted.example",
                                    "Access-Control-Request-Method": "POST",
                                    "Access-Control-Request-Headers": "content-type"})
    assert pre.status_code == 204
    assert pre.headers["Access-Control-Allow-Origin"] == "http://trusted.example"
    assert "POST" in pre.headers["Access-Control-Allow-Methods"]
    pre = Client().options("/api/auth/sign-in/email", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in pre.headers


def test_change_password():
    email = unique_email("pw")
    c, _ = sign_up(email=email)
    other, _ = sign_in(email)
    err = assert_error(c.post("/api/users/me/password",
                              json={"currentPassword": "wrong-password", "newPassword": "new-password-1"}),
                       400, "VALIDATION_ERROR")
    assert err["details"][0]["field"] == "currentPassword"
    assert_error(c.post("/api/users/me/password",
                        json={"currentPassword": PASSWORD, "newPassword": "short"}), 400)
    assert_error(c.post("/api/users/me/password", json={}), 400)
    r = c.post("/api/users/me/password",
               json={"currentPassword": PASSWORD, "newPassword": "new-password-1"})
    assert r.status_code == 200, r.text
    c.get_json("/api/users/me")  # the current session stays
    assert_error(other.get("/api/users/me"), 401)  # the others end
    sign_in(email, "new-password-1")
    sign_in(email, PASSWORD, expect=401)
    assert_error(Client().post("/api/users/me/password", json={}), 401)


def test_unknown_route_and_wrong_method():
    c = Client()
    assert_error(c.get("/api/nothing-here"), 404, "NOT_FOUND")
    r = c.delete("/api/auth/sign-in/email")
    assert_error(r, 405, "METHOD_NOT_ALLOWED")
    assert "POST" in r.headers["Allow"]
