"""A lost second factor and what ends trusted devices (docs/api.md "Two-factor sign-in",
docs/security.md 6.4.4 and 7.4.3): an administrator's reset, DELETE /api/users/:id/two-factor,
for a user who lost their authenticator and every backup code; and a user's trusted devices and
pending sign-in challenges forgotten after a password change, a password reset and the end of
every session of the user (their own revoke-sessions, an administrator's, `coachd end-sessions`),
so that a device trusted before no longer skips the second step."""
import pytest

from helpers import PASSWORD, Client, assert_error, psql_value, second_coachd, sign_in
from orgs import new_org
from test_end_sessions_cli import end_sessions
from test_session_management import ended, stream_for, warm
from test_two_factor import TF, enable, hotp, steady_step, user_with_two_factor

NEW_PASSWORD = "brand-new-pass"
TABLES = ("two_factors", "two_factor_backup_codes", "two_factor_challenges", "trusted_devices")


@pytest.fixture(scope="module")
def other():
    """A second coachd (two workers) on the same database and Redis: another worker's cache."""
    with second_coachd(WORKERS=2) as base:
        yield base


def second_step(email, password=PASSWORD, client=None):
    """Signs in with the password and expects the second step; the client holds its cookie."""
    c = client or Client()
    r = c.post("/api/auth/sign-in/email", json={"email": email, "password": password})
    assert r.status_code == 200, r.text
    assert r.json() == {"twoFactorRedirect": True, "twoFactorMethods": ["totp"]}
    assert c.cookies.get("auth.session_token") is None
    return c


def trusted_device(email, secret, step):
    """Completes a sign-in with trustDevice: the trust_device cookie's value."""
    c = second_step(email)
    r = c.post(TF + "/verify-totp", json={"code": hotp(secret, step), "trustDevice": True})
    assert r.status_code == 200, r.text
    trust = c.cookies.get("auth.trust_device")
    assert trust
    return trust


def skips(email, trust, password=PASSWORD):
    """Whether a sign-in presenting the trust_device cookie skips the second step."""
    c = Client()
    c.cookies.set("auth.trust_device", trust)
    data = c.post_json("/api/auth/sign-in/email", {"email": email, "password": password})
    return "user" in data and data["user"]["email"] == email


def rows_of(user_id):
    return {t: psql_value("SELECT count(*) FROM %s WHERE user_id = :'u'" % t, u=user_id)
            for t in TABLES}


def notices_to(email, subject):
    return psql_value("SELECT count(*) FROM outbox WHERE kind = 'mail' AND payload->>'to' = :'e'"
                      " AND payload->>'subject' = :'s'", e=email, s=subject)


# ---- DELETE /api/users/:id/two-factor -----------------------------------------------------------


def test_admin_resets_a_lost_two_factor(mail, other):
    org = new_org(roles=("OrganizationAdmin", "Manager"))
    coach, cu = org.add_member("Coach", lang="es")
    email = cu["email"]
    secret, _ = enable(coach)
    step = steady_step()
    assert coach.post_json(TF + "/verify-totp", {"code": hotp(secret, step - 1)}) == {
        "status": True}
    trust = trusted_device(email, secret, step)
    pending = second_step(email)
    there = warm(coach, other)
    stream = stream_for(coach, other)
    admin = org.clients["OrganizationAdmin"]
    path = "/api/users/%s/two-factor" % cu["id"]
    try:
        # A Manager may not, nor the user themselves (by id or as `me`): their route is
        # two-factor/disable, with the password.
        assert_error(org.clients["Manager"].request("DELETE", path), 403, "FORBIDDEN")
        err = assert_error(coach.request("DELETE", path), 403, "FORBIDDEN")
        assert "/api/auth/two-factor/disable" in err["message"], err
        err = assert_error(admin.request("DELETE", "/api/users/me/two-factor"), 403, "FORBIDDEN")
        assert "/api/auth/two-factor/disable" in err["message"], err
        assert psql_value("SELECT two_factor_enabled FROM users WHERE id = :'u'",
                          u=cu["id"]) == "t"
        assert_error(admin.request("DELETE", "/api/users/%s/two-factor" % ("c" + "0" * 24)), 404,
                     "NOT_FOUND")

        r = admin.request("DELETE", path)
        assert r.status_code == 200, r.text
        assert r.json() == {"success": True}
        # Everything of the second factor is gone and it is off.
        assert rows_of(cu["id"]) == {t: "0" for t in TABLES}
        assert psql_value("SELECT two_factor_enabled FROM users WHERE id = :'u'",
                          u=cu["id"]) == "f"
        # Every session ended, here and on the other coachd (whose cached context was dropped
        # before the answer), and the open stream closed.
        for c in (coach, there):
            assert_error(c.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
        assert ended(stream)
        # The pending sign-in cannot be completed any more, even with a right code.
        assert_error(pending.post(TF + "/verify-totp", json={"code": hotp(secret, step + 1)}),
                     401, "INVALID_TWO_FACTOR_COOKIE")
        # The user is told, in their language.
        m = mail.wait_for(email, subject="dos pasos est\u00e1 desactivado")
        assert "dispositivos de confianza" in m.text
        # The password alone signs in now; the old trusted device means nothing.
        _, data = sign_in(email)
        assert data["user"]["id"] == cu["id"]
        assert skips(email, trust)
        # The administrator's own session is untouched.
        admin.get_json("/api/users/me")
        # The user may set two-factor up again.
        c2, _ = sign_in(email)
        new_secret, _ = enable(c2)
        assert new_secret != secret
    finally:
        stream.close()


def test_reset_of_a_user_without_two_factor_ends_sessions_and_sends_nothing():
    org = new_org(roles=("OrganizationAdmin",))
    coach, cu = org.add_member("Coach")
    r = org.clients["OrganizationAdmin"].request("DELETE", "/api/users/%s/two-factor" % cu["id"])
    assert r.status_code == 200 and r.json() == {"success": True}, r.text
    assert_error(coach.request("GET", "/api/users/me"), 401, "UNAUTHENTICATED")
    # Nothing was turned off, so no notice is queued.
    assert notices_to(cu["email"], "Two-factor sign-in is off") == "0"


def test_reset_is_refused_for_a_user_another_organization_shares():
    org = new_org(roles=("OrganizationAdmin",))
    elsewhere = new_org(roles=("OrganizationAdmin",))
    c, u, _, _, _ = user_with_two_factor()
    org.add_member("Coach", user=(c, u))
    elsewhere.add_member("Coach", key="shared", user=(None, u))
    assert_error(org.clients["OrganizationAdmin"].request("DELETE", "/api/users/%s/two-factor"
                                                          % u["id"]), 403, "FORBIDDEN")
    assert psql_value("SELECT two_factor_enabled FROM users WHERE id = :'u'", u=u["id"]) == "t"
    # A PlatformAdmin may.
    r = org.admin.request("DELETE", "/api/users/%s/two-factor" % u["id"])
    assert r.status_code == 200, r.text
    assert psql_value("SELECT two_factor_enabled FROM users WHERE id = :'u'", u=u["id"]) == "f"


# ---- a credential change or the end of every session forgets trusted devices -------------------


@pytest.mark.parametrize("action", ["password-change", "password-reset", "revoke-sessions",
                                    "admin-revoke-sessions", "end-sessions"])
def test_trusted_device_stops_skipping(action, mail):
    c, user, secret, _, step = user_with_two_factor()
    email = user["email"]
    trust = trusted_device(email, secret, step)
    assert skips(email, trust)
    pending = second_step(email)
    password = PASSWORD
    if action == "password-change":
        c.post_json("/api/users/me/password",
                    {"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD})
        password = NEW_PASSWORD
    elif action == "password-reset":
        Client().post_json("/api/auth/forget-password", {"email": email})
        token = mail.wait_for(email, subject="password").token("token=")
        Client().post_json("/api/auth/reset-password", {"token": token, "newPassword": NEW_PASSWORD})
        password = NEW_PASSWORD
    elif action == "revoke-sessions":
        assert c.post_json("/api/auth/revoke-sessions", {}) == {"status": True}
    elif action == "admin-revoke-sessions":
        org = new_org(roles=("OrganizationAdmin",))
        org.add_member("Coach", user=(c, user))
        assert org.clients["OrganizationAdmin"].post_json(
            "/api/users/%s/revoke-sessions" % user["id"]) == {"success": True}
    else:
        r = end_sessions("--email", email)
        assert r.returncode == 0, r.stderr
    counts = rows_of(user["id"])
    assert counts["trusted_devices"] == "0" and counts["two_factor_challenges"] == "0", counts
    # The challenge that waited (its password step done before) cannot be completed.
    assert_error(pending.post(TF + "/verify-totp", json={"code": hotp(secret, step + 1)}), 401,
                 "INVALID_TWO_FACTOR_COOKIE")
    # The device trusted before asks for the second step again; two-factor itself stays on.
    d = Client()
    d.cookies.set("auth.trust_device", trust)
    second_step(email, password, client=d)
    assert psql_value("SELECT two_factor_enabled FROM users WHERE id = :'u'",
                      u=user["id"]) == "t"
