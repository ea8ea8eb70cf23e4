"""Password reset, email verification and resend-activation, end to end through the SMTP sink."""
from urllib.parse import parse_qs, urlsplit

from helpers import (PASSWORD, Client, assert_error, psql, psql_value, redis_cli, sign_in,
                     sign_up, unique_email)

FRONTEND = None


def frontend_base(location):
    parts = urlsplit(location)
    return parts.path, parse_qs(parts.query)


def test_forget_password_same_answer_for_unknown_and_known(mail):
    email = unique_email("forgot")
    sign_up(email=email)
    c = Client()
    known = c.post("/api/auth/forget-password", json={"email": email})
    unknown = c.post("/api/auth/forget-password", json={"email": unique_email("nobody")})
    assert known.status_code == unknown.status_code == 200
    assert known.json() == unknown.json()
    m = mail.wait_for(email, subject="password")
    assert "reset-password" in m.link("token=")
    assert_error(c.post("/api/auth/forget-password", json={"email": "bad"}), 400)
    assert_error(c.post("/api/auth/forget-password",
                        json={"email": email, "redirectTo": "https://evil.example/x"}), 400)


def test_reset_password_flow_ends_sessions(mail):
    email = unique_email("reset")
    c, _ = sign_up(email=email)
    Client().post_json("/api/auth/forget-password",
                       {"email": email, "redirectTo": "/account/new-password"})
    m = mail.wait_for(email, subject="password")
    link = m.link("token=")
    assert urlsplit(link).path == "/account/new-password"
    token = m.token("token=")
    anon = Client()
    assert_error(anon.post("/api/auth/reset-password", json={"token": token, "newPassword": "short"}),
                 400)
    # An unknown or malformed token is a failure of the field `token`.
    for bad in ("A" * 43, "not a token"):
        err = assert_error(anon.post("/api/auth/reset-password",
                                     json={"token": bad, "newPassword": "brand-new-pass"}), 400)
        assert [d["field"] for d in err["details"]] == ["token"], err
        assert err["message"] == "Invalid or expired token", err
    r = anon.post("/api/auth/reset-password", json={"token": token, "newPassword": "brand-new-pass"})
    assert r.status_code == 200, r.text
    assert_error(c.get("/api/users/me"), 401)  # every session of the user ended
    sign_in(email, PASSWORD, expect=401)
    sign_in(email, "brand-new-pass")
    # Single use.
    err = assert_error(anon.post("/api/auth/reset-password",
                                 json={"token": token, "newPassword": "another-pass-1"}), 400)
    assert [d["field"] for d in err["details"]] == ["token"], err


def test_reset_token_expires(mail):
    email = unique_email("expire")
    sign_up(email=email)
    Client().post_json("/api/auth/forget-password", {"email": email})
    token = mail.wait_for(email, subject="password").token("token=")
    psql("UPDATE verifications SET expires_at = now() - interval '1 second'"
         " WHERE kind = 'password_reset' AND user_id = (SELECT id FROM users WHERE email = :'e')",
         e=email)
    assert_error(Client().post("/api/auth/reset-password",
                               json={"token": token, "newPassword": "brand-new-pass"}), 400)


def test_reset_mail_language(mail):
    email = unique_email("idioma")
    sign_up(email=email, lang="es")
    Client().post_json("/api/auth/forget-password", {"email": email})
    es = mail.wait_for(email, count=1, subject="contraseña")
    assert "contraseña" in es.text
    # Without redirectTo, the link opens the reset page in the mail's language.
    link = es.link("/reset-password?token=")
    assert parse_qs(urlsplit(link).query)["lang"] == ["es"], link
    # The callback URL's language wins over the profile's (after the per-email cooldown).
    redis_cli("DEL", "cooldown:forget:%s" % email)
    Client().post_json("/api/auth/forget-password", {"email": email, "redirectTo": "/reset?lang=en"})
    en = mail.wait_for(email, count=1, subject="password")
    assert "password" in en.text.lower()


def test_verify_email_link_and_redirects(mail):
    email = unique_email("verify")
    c, u = sign_up(email=email, lang="es")
    link = mail.wait_for(email).link("verify-email")
    r = Client().get(link, allow_redirects=False)
    assert r.status_code == 302
    path, q = frontend_base(r.headers["Location"])
    assert path == "/email-verification" and q == {"lang": ["es"]}
    assert c.get_json("/api/auth/session")["user"]["emailVerified"] is True
    again = Client().get(link, allow_redirects=False)
    assert again.status_code == 302
    assert parse_qs(urlsplit(again.headers["Location"]).query)["error"] == ["invalid_token"]
    bad = Client().get("/api/auth/verify-email?token=nonsense", allow_redirects=False)
    assert parse_qs(urlsplit(bad.headers["Location"]).query)["error"] == ["invalid_token"]
    err = assert_error(
        Client().get("/api/auth/verify-email?token=x&callbackURL=https://evil.example/"), 400)
    assert [d["field"] for d in err["details"]] == ["callbackURL"], err


def test_verify_email_expired_token(mail):
    email = unique_email("late")
    sign_up(email=email)
    link = mail.wait_for(email).link("verify-email")
    psql("UPDATE verifications SET expires_at = now() - interval '1 second'"
         " WHERE kind = 'email_verify' AND user_id = (SELECT id FROM users WHERE email = :'e')",
         e=email)
    r = Client().get(link, allow_redirects=False)
    q = parse_qs(urlsplit(r.headers["Location"]).query)
    assert q["error"] == ["token_expired"] and q["lang"] == ["en"]


def test_resend_activation_and_cooldown(mail):
    email = unique_email("resend")
    sign_up(email=email)
    mail.wait_for(email, count=1)
    c = Client()
    r = c.post("/api/auth/resend-activation", json={"email": email, "callbackURL": "/welcome?lang=es"})
    assert r.status_code == 200, r.text
    assert r.json()["success"] is True
    m = mail.wait_for(email, count=2)
    assert "callbackURL" in m.link("verify-email")
    again = c.post("/api/auth/resend-activation", json={"email": email})
    err = assert_error(again, 429, "COOLDOWN")
    assert 0 < again.json()["retryAfterSeconds"] <= 60
    assert int(again.headers["Retry-After"]) == again.json()["retryAfterSeconds"]
    assert err["message"]
    # Unknown addresses answer the same (and get the same cooldown).
    ghost = unique_email("ghost")
    first = c.post("/api/auth/resend-activation", json={"email": ghost})
    assert first.status_code == 200 and first.json() == r.json()
    assert_error(c.post("/api/auth/resend-activation", json={"email": ghost}), 429, "COOLDOWN")
    assert_error(c.post("/api/auth/resend-activation", json={"email": "not-an-email"}), 400)
    mail.none_to(ghost, wait=0.5)


def test_resend_activation_not_sent_when_verified(mail):
    email = unique_email("done")
    sign_up(email=email)
    mail.wait_for(email, count=1)
    psql("UPDATE users SET email_verified = true WHERE email = :'e'", e=email)
    Client().post_json("/api/auth/resend-activation", {"email": email})
    assert psql_value("SELECT count(*) FROM verifications v JOIN users u ON u.id = v.user_id"
                      " WHERE u.email = :'e' AND v.kind = 'email_verify'", e=email) == "1"
