"""Smoke tests: the server answers, errors have their shape, and mail reaches the sink."""
from helpers import assert_error, unique_email


def test_health_with_client_key(client, client_key):
    r = client.get("/api/health", headers={"X-Client-Key": client_key})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ok"
    assert isinstance(body["version"], str) and body["version"]
    for check in ("database", "cache", "storage", "mail", "video", "env"):
        assert body["checks"][check] == "ok", body
    assert body["env"]["environment"] == "development"


def test_health_without_client_key_is_401(client):
    assert_error(client.get("/api/health"), 401)
    assert_error(client.get("/api/health", headers={"X-Client-Key": "wrong"}), 401)


def test_unknown_route_is_404_json(client):
    err = assert_error(client.get("/api/no-such-route"), 404, "NOT_FOUND")
    assert "details" not in err


def test_sign_up_sends_verification_mail(sign_up, mail):
    email = unique_email("smoke")
    c, user = sign_up(email=email, name="Smoke Test")
    assert user["email"] == email
    assert c.session_token, "sign-up sets the session cookie"
    m = mail.wait_for(email)
    assert m.token("verify-email")
