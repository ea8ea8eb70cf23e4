"""Two-factor sign-in (docs/api.md "Two-factor sign-in"): enable and verify, the sign-in's second
step and its cookie, replay and window rules, backup codes, the wrong-code limit, trusted devices,
disable, the secret at rest, and the organization policy requireTwoFactorForAdmins.

Codes are computed here from the otpauth URI with the standard library (RFC 6238: HMAC-SHA-1,
6 digits, 30 s), independently of the server's code."""
import base64
import hashlib
import hmac
import os
import re
import struct
import time
from urllib.parse import parse_qs, urlsplit

from helpers import (PASSWORD, Client, assert_error, psql, psql_value, sign_in, sign_up,
                     unique_email)

TF = "/api/auth/two-factor"


def hotp(secret_b32, counter):
    key = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8))
    mac = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    off = mac[-1] & 0x0F
    return "%06d" % ((struct.unpack(">I", mac[off:off + 4])[0] & 0x7FFFFFFF) % 1000000)


def secret_of(uri):
    parts = urlsplit(uri)
    assert parts.scheme == "otpauth" and parts.netloc == "totp", uri
    q = parse_qs(parts.query)
    assert q["digits"] == ["6"] and q["period"] == ["30"] and q["algorithm"] == ["SHA1"], uri
    return q["secret"][0]


def steady_step():
    """The current 30-second step, waiting out the last 4 seconds of one so that a few calls
    made next see the same step."""
    t = time.time()
    if t % 30 > 26:
        time.sleep(30 - t % 30 + 0.2)
    return int(time.time()) // 30


def enable(c, password=PASSWORD):
    data = c.post_json(TF + "/enable", {"password": password})
    assert data["method"] == "totp"
    assert len(data["backupCodes"]) == 10 and len(set(data["backupCodes"])) == 10
    return secret_of(data["totpURI"]), data["backupCodes"]


def user_with_two_factor():
    """A signed-up user with two-factor on; (client, user, secret, backup codes, step used)."""
    c, user = sign_up(email=unique_email("tf"))
    secret, codes = enable(c)
    step = steady_step()
    # The previous step's code: the current and the next one stay free for a sign-in.
    assert c.post_json(TF + "/verify-totp", {"code": hotp(secret, step - 1)}) == {"status": True}
    return c, user, secret, codes, step


def start_sign_in(email, client=None):
    c = client or Client()
    r = c.post("/api/auth/sign-in/email", json={"email": email, "password": PASSWORD})
    assert r.status_code == 200, r.text
    assert r.json() == {"twoFactorRedirect": True, "twoFactorMethods": ["totp"]}
    cookies = r.headers.get("Set-Cookie", "")
    assert "auth.two_factor=" in cookies and "Max-Age=600" in cookies, cookies
    assert "HttpOnly" in cookies and "SameSite=Lax" in cookies, cookies
    assert c.cookies.get("auth.session_token") is None  # no session yet
    return c


def test_enable_then_verify_turns_it_on(mail):
    email = unique_email("tfon")
    c, user = sign_up(email=email)
    # Wrong or missing password: a field error, nothing stored.
    err = assert_error(c.post(TF + "/enable", json={"password": "wrong-password"}), 400,
                       "VALIDATION_ERROR")
    assert [d["field"] for d in err["details"]] == ["password"]
    assert_error(c.post(TF + "/enable", json={}), 400, "VALIDATION_ERROR")
    assert_error(Client().post(TF + "/enable", json={"password": PASSWORD}), 401)
    secret, codes = enable(c)
    for code in codes:
        assert re.fullmatch(r"[A-Za-z0-9]{5}(-[A-Za-z0-9]{5}){3}", code), code
    # Not on before the first accepted code: the sign-in is a normal one.
    assert psql_value("SELECT two_factor_enabled FROM users WHERE id = :'u'", u=user["id"]) == "f"
    sign_in(email)
    # get-totp-uri gives the same secret while the setup waits.
    uri = c.post_json(TF + "/get-totp-uri", {"password": PASSWORD})["totpURI"]
    assert secret_of(uri) == secret
    step = steady_step()
    assert_error(c.post(TF + "/verify-totp", json={"code": hotp(secret, step + 5)}), 401,
                 "INVALID_CODE")
    assert_error(c.post(TF + "/verify-totp", json={"code": "12345"}), 401, "INVALID_CODE")
    assert c.post_json(TF + "/verify-totp", {"code": hotp(secret, step)}) == {"status": True}
    assert psql_value("SELECT two_factor_enabled FROM users WHERE id = :'u'", u=user["id"]) == "t"
    assert "on" in mail.wait_for(email, subject="Two-factor").subject
    # Once on, the secret is not shown again and enable refuses.
    assert_error(c.post(TF + "/get-totp-uri", json={"password": PASSWORD}), 400,
                 "TOTP_ALREADY_ENABLED")
    assert_error(c.post(TF + "/enable", json={"password": PASSWORD}), 400, "TOTP_ALREADY_ENABLED")


def test_enable_again_before_verify_replaces_the_secret():
    c, _ = sign_up(email=unique_email("tfre"))
    first, _ = enable(c)
    second, _ = enable(c)
    assert first != second
    step = steady_step()
    assert_error(c.post(TF + "/verify-totp", json={"code": hotp(first, step)}), 401,
                 "INVALID_CODE")
    assert c.post_json(TF + "/verify-totp", {"code": hotp(second, step)}) == {"status": True}


def test_verify_without_setup_and_without_cookie():
    c, _ = sign_up(email=unique_email("tfno"))
    assert_error(c.post(TF + "/verify-totp", json={"code": "123456"}), 400, "TOTP_NOT_ENABLED")
    assert_error(c.post(TF + "/get-totp-uri", json={"password": PASSWORD}), 400,
                 "TOTP_NOT_ENABLED")
    assert_error(c.post(TF + "/generate-backup-codes", json={"password": PASSWORD}), 400,
                 "TWO_FACTOR_NOT_ENABLED")
    anon = Client()
    assert_error(anon.post(TF + "/verify-totp", json={"code": "123456"}), 401,
                 "INVALID_TWO_FACTOR_COOKIE")
    assert_error(anon.post(TF + "/verify-backup-code", json={"code": "abcde-fghij"}), 401,
                 "INVALID_TWO_FACTOR_COOKIE")
    anon.cookies.set("auth.two_factor", "A" * 43)
    assert_error(anon.post(TF + "/verify-totp", json={"code": "123456"}), 401,
                 "INVALID_TWO_FACTOR_COOKIE")


def test_sign_in_second_step_with_totp():
    c0, user, secret, _, step = user_with_two_factor()
    c = start_sign_in(user["email"])
    # The challenge cookie is not a session.
    assert_error(c.get("/api/users/me"), 401)
    assert c.get("/api/auth/get-session").json() is None
    # A replay of the code that turned it on (its step is spent) and a code two steps off.
    assert_error(c.post(TF + "/verify-totp", json={"code": hotp(secret, step - 1)}), 401,
                 "INVALID_CODE")
    assert_error(c.post(TF + "/verify-totp", json={"code": hotp(secret, step - 2)}), 401,
                 "INVALID_CODE")
    assert_error(c.post(TF + "/verify-totp", json={"code": hotp(secret, step + 2)}), 401,
                 "INVALID_CODE")
    r = c.post(TF + "/verify-totp", json={"code": hotp(secret, step)})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["user"]["id"] == user["id"] and body["session"]["userId"] == user["id"]
    assert "auth.two_factor=; Max-Age=0" in r.headers["Set-Cookie"]
    assert c.get_json("/api/users/me")["data"]["id"] == user["id"]
    # The same step again, on a new sign-in: refused (each step once per user).
    c2 = start_sign_in(user["email"])
    assert_error(c2.post(TF + "/verify-totp", json={"code": hotp(secret, step)}), 401,
                 "INVALID_CODE")
    # The next step is still good.
    c2.post_json(TF + "/verify-totp", {"code": hotp(secret, step + 1)})



def test_second_step_ends_the_session_whose_cookie_the_client_held():
    """As every sign-in does: the session cookie of another user that the client still held
    ends, here with the first step, and the cookie is cleared, so the second step runs as a
    sign-in (before, the session lived on and the second step answered TOTP_NOT_ENABLED as
    that session)."""
    _, user, secret, _, step = user_with_two_factor()
    other, _ = sign_up(email=unique_email("tf-other"))
    held = other.cookies.get("auth.session_token")
    witness = Client()
    witness.cookies.set("auth.session_token", held)
    assert witness.get("/api/users/me").status_code == 200
    r = other.post("/api/auth/sign-in/email", json={"email": user["email"], "password": PASSWORD})
    assert r.json() == {"twoFactorRedirect": True, "twoFactorMethods": ["totp"]}, r.text
    # The first step makes no session; it ends the held one and clears its cookie.
    assert "auth.session_token=;" in r.headers["Set-Cookie"], r.headers["Set-Cookie"]
    assert_error(witness.get("/api/users/me"), 401)
    r = other.post(TF + "/verify-totp", json={"code": hotp(secret, step)})
    assert r.status_code == 200, r.text
    assert other.get_json("/api/users/me")["data"]["id"] == user["id"]
    assert_error(witness.get("/api/users/me"), 401)
    assert psql_value("SELECT count(*) FROM sessions WHERE token_hash = encode(sha256("
                      "convert_to(:'t', 'UTF8')), 'hex')", t=held) == "0"

def test_challenge_cookie_is_single_use_and_expires():
    _, user, secret, codes, step = user_with_two_factor()
    c = start_sign_in(user["email"])
    spent = c.cookies.get("auth.two_factor")
    c.post_json(TF + "/verify-totp", {"code": hotp(secret, step)})
    # Replaying the spent challenge cookie (with a fresh, right code) signs nobody in.
    replay = Client()
    replay.cookies.set("auth.two_factor", spent)
    assert_error(replay.post(TF + "/verify-totp", json={"code": hotp(secret, step + 1)}), 401,
                 "INVALID_TWO_FACTOR_COOKIE")
    # A challenge past its 10 minutes is refused too.
    c2 = start_sign_in(user["email"])
    psql("UPDATE two_factor_challenges SET expires_at = now() - interval '1 second' "
         "WHERE user_id = :'u'", u=user["id"])
    assert_error(c2.post(TF + "/verify-backup-code", json={"code": codes[0]}), 401,
                 "INVALID_TWO_FACTOR_COOKIE")
    assert c2.cookies.get("auth.session_token") is None
    # The cookie is single purpose: it is no session anywhere.
    c3 = start_sign_in(user["email"])
    c3.cookies.set("auth.session_token", c3.cookies.get("auth.two_factor"))
    assert_error(c3.get("/api/users/me"), 401)


def test_backup_code_single_use(mail):
    _, user, _, codes, _ = user_with_two_factor()
    c = start_sign_in(user["email"])
    assert_error(c.post(TF + "/verify-backup-code", json={"code": "zzzzz-zzzzz"}), 401,
                 "INVALID_CODE")
    # A wrong code leaves the challenge waiting; the right one ends it.
    body = c.post_json(TF + "/verify-backup-code", {"code": codes[0]})
    assert body["user"]["id"] == user["id"]
    assert c.get_json("/api/users/me")["data"]["id"] == user["id"]
    assert mail.wait_for(user["email"], subject="backup code")
    c2 = start_sign_in(user["email"])
    assert_error(c2.post(TF + "/verify-backup-code", json={"code": codes[0]}), 401,
                 "INVALID_CODE")
    c2.post_json(TF + "/verify-backup-code", {"code": codes[1]})
    # Stored as keyed hashes: no code appears in the table.
    stored = psql("SELECT code_hash FROM two_factor_backup_codes WHERE user_id = :'u'",
                  u=user["id"])
    assert len(stored) == 8
    assert not any(code in str(stored) for code in codes)


def test_backup_code_typed_without_dashes_or_with_spaces_and_case_sensitive():
    """A code is 20 letters and digits (about 119 bits, ASVS 6.5.2): typed without its dashes or
    with white space around it, it is the same code; in the other case it is another one."""
    _, user, _, codes, _ = user_with_two_factor()
    assert all(len(code.replace("-", "")) == 20 for code in codes)
    c = start_sign_in(user["email"])
    assert_error(c.post(TF + "/verify-backup-code", json={"code": codes[0].swapcase()}), 401,
                 "INVALID_CODE")
    assert_error(c.post(TF + "/verify-backup-code", json={"code": codes[0][:-1]}), 401,
                 "INVALID_CODE")
    body = c.post_json(TF + "/verify-backup-code",
                       {"code": "  %s \n" % codes[0].replace("-", "")})
    assert body["user"]["id"] == user["id"]
    c2 = start_sign_in(user["email"])
    assert c2.post_json(TF + "/verify-backup-code", {"code": "\t" + codes[1] + " "})["user"]
    # Spent, whichever way it was typed.
    c3 = start_sign_in(user["email"])
    assert_error(c3.post(TF + "/verify-backup-code", json={"code": codes[0]}), 401,
                 "INVALID_CODE")


def test_generate_backup_codes_replaces_the_old_ones():
    c0, user, _, old, _ = user_with_two_factor()
    assert_error(c0.post(TF + "/generate-backup-codes", json={"password": "nope-nope"}), 400,
                 "VALIDATION_ERROR")
    data = c0.post_json(TF + "/generate-backup-codes", {"password": PASSWORD})
    assert data["status"] is True and len(data["backupCodes"]) == 10
    c = start_sign_in(user["email"])
    assert_error(c.post(TF + "/verify-backup-code", json={"code": old[0]}), 401, "INVALID_CODE")
    c.post_json(TF + "/verify-backup-code", {"code": data["backupCodes"][0]})


def test_wrong_codes_reach_429():
    _, user, secret, _, step = user_with_two_factor()
    c = start_sign_in(user["email"])
    for i in range(5):
        assert_error(c.post(TF + "/verify-totp", json={"code": "000000" if i % 2 else "999999"}),
                     401, "INVALID_CODE")
    err = assert_error(c.post(TF + "/verify-totp", json={"code": hotp(secret, step)}), 429,
                       "RATE_LIMITED")
    assert "two-factor" in err["message"]
    # The limit is the account's: another sign-in from another address is limited too, and a
    # backup code as well.
    c2 = start_sign_in(user["email"])
    assert_error(c2.post(TF + "/verify-backup-code", json={"code": "aaaaa-aaaaa"}), 429,
                 "RATE_LIMITED")


def test_trusted_device_skips_the_second_step():
    _, user, secret, _, step = user_with_two_factor()
    c = start_sign_in(user["email"])
    r = c.post(TF + "/verify-totp", json={"code": hotp(secret, step), "trustDevice": True})
    assert r.status_code == 200, r.text
    set_cookie = r.headers["Set-Cookie"]
    assert "auth.trust_device=" in set_cookie and "Max-Age=2592000" in set_cookie, set_cookie
    trust = c.cookies.get("auth.trust_device")
    assert trust
    # Stored hashed only.
    assert psql_value("SELECT count(*) FROM trusted_devices WHERE user_id = :'u'",
                      u=user["id"]) == "1"
    assert psql_value("SELECT count(*) FROM trusted_devices WHERE token_hash = :'t'",
                      t=trust) == "0"
    d = Client()
    d.cookies.set("auth.trust_device", trust)
    _, data = sign_in(user["email"], client=d)
    assert data["user"]["id"] == user["id"]
    assert d.get_json("/api/users/me")["data"]["id"] == user["id"]
    # Bound to its user: another two-factor user presenting it gets the second step.
    _, other, _, _, _ = user_with_two_factor()
    e = Client()
    e.cookies.set("auth.trust_device", trust)
    start_sign_in(other["email"], client=e)
    # Expired: the second step again.
    psql("UPDATE trusted_devices SET expires_at = now() - interval '1 second' WHERE user_id = :'u'",
         u=user["id"])
    f = Client()
    f.cookies.set("auth.trust_device", trust)
    start_sign_in(user["email"], client=f)


def test_disable(mail):
    c, user, secret, _, step = user_with_two_factor()
    c1 = start_sign_in(user["email"])
    c1.post_json(TF + "/verify-totp", {"code": hotp(secret, step), "trustDevice": True})
    assert_error(c.post(TF + "/disable", json={"password": "wrong-password"}), 400,
                 "VALIDATION_ERROR")
    assert c.post_json(TF + "/disable", {"password": PASSWORD}) == {"status": True}
    assert mail.wait_for(user["email"], subject="off")
    for table in ("two_factors", "two_factor_backup_codes", "trusted_devices",
                  "two_factor_challenges"):
        assert psql_value("SELECT count(*) FROM %s WHERE user_id = :'u'" % table,
                          u=user["id"]) == "0"
    _, data = sign_in(user["email"])
    assert data["user"]["id"] == user["id"]
    # Disabling again is harmless; enabling again starts a new secret.
    c.post_json(TF + "/disable", {"password": PASSWORD})
    new_secret, _ = enable(c)
    assert new_secret != secret


def test_secret_is_sealed_and_never_shown_or_logged():
    c, user, secret, codes, step = user_with_two_factor()
    sealed = psql_value("SELECT secret_sealed FROM two_factors WHERE user_id = :'u'", u=user["id"])
    raw = base64.b32decode(secret + "=" * (-len(secret) % 8))
    assert raw.hex() not in sealed and secret not in sealed
    assert len(sealed) == 2 * (12 + 20 + 16)
    answers = [c.get("/api/users/me").text, c.get("/api/auth/session").text,
               c.post(TF + "/get-totp-uri", json={"password": PASSWORD}).text]
    s = start_sign_in(user["email"])
    answers.append(s.post(TF + "/verify-totp", json={"code": hotp(secret, step)}).text)
    for a in answers:
        assert secret not in a and raw.hex() not in a
    log = os.environ.get("COACHD_LOG_FILE")
    if log and os.path.exists(log):
        text = open(log, encoding="utf-8", errors="replace").read()
        assert secret not in text and sealed not in text
        assert not any(code in text for code in codes)


# ---- the organization policy: requireTwoFactorForAdmins ----

def test_policy_requires_two_factor_of_admins_and_managers():
    from orgs import new_org
    org = new_org()
    path = "/api/organizations/%s" % org.id
    data = org.admin.get_json(path)["data"]
    assert data["requireTwoFactorForAdmins"] is False
    assert_error(org.admin.patch(path, json={"requireTwoFactorForAdmins": "yes"}), 400,
                 "VALIDATION_ERROR")
    assert org.admin.patch_json(path, {"requireTwoFactorForAdmins": True})["data"][
        "requireTwoFactorForAdmins"] is True
    oa, mgr = org.client("OrganizationAdmin"), org.client("Manager")
    # Refused at once (the cached contexts were dropped before the PATCH answered), on the
    # organization's routes: by path and by context.
    for c in (oa, mgr):
        assert_error(c.get("/api/mentorships"), 403, "TWO_FACTOR_REQUIRED")
        assert_error(c.get("/api/users"), 403, "TWO_FACTOR_REQUIRED")
        assert_error(c.get(path + "/users"), 403, "TWO_FACTOR_REQUIRED")
    assert_error(oa.get(path), 403, "TWO_FACTOR_REQUIRED")
    assert_error(oa.patch(path, json={"requireTwoFactorForAdmins": False}), 403,
                 "TWO_FACTOR_REQUIRED")
    # Coaches and Teachers, and the PlatformAdmin who is no member, are not concerned.
    org.client("Coach").get_json("/api/mentorships")
    org.client("Teacher").get_json("/api/mentorships")
    org.admin.get_json(path + "/users")
    # The auth and two-factor paths and the caller's own account stay open.
    for c in (oa, mgr):
        c.get_json("/api/users/me")
        assert c.get("/api/auth/get-session").status_code == 200
        c.get_json("/api/me/organizations")
    # Turning two-factor on lifts the refusal at once.
    secret, _ = enable(mgr)
    assert_error(mgr.get("/api/mentorships"), 403, "TWO_FACTOR_REQUIRED")  # not verified yet
    step = steady_step()
    mgr.post_json(TF + "/verify-totp", {"code": hotp(secret, step)})
    mgr.get_json("/api/mentorships")
    mgr.get_json(path + "/users")
    # Turning it off brings it back at once.
    mgr.post_json(TF + "/disable", {"password": PASSWORD})
    assert_error(mgr.get("/api/mentorships"), 403, "TWO_FACTOR_REQUIRED")
    # The policy off: open again at once.
    org.admin.patch_json(path, {"requireTwoFactorForAdmins": False})
    oa.get_json("/api/mentorships")
    oa.get_json(path)


def test_policy_of_one_organization_does_not_reach_another():
    from orgs import new_org
    a, b = new_org(roles=("Manager",)), new_org(roles=())
    c, u = a.client("Manager"), a.users["Manager"]
    b.add_member("Manager", user=(None, u))
    a.admin.patch_json("/api/organizations/%s" % a.id, {"requireTwoFactorForAdmins": True})
    assert_error(c.get("/api/mentorships"), 403, "TWO_FACTOR_REQUIRED")
    c.org(b.id)
    c.get_json("/api/mentorships")
    c.get_json("/api/organizations/%s/users" % b.id)
    assert_error(c.get("/api/organizations/%s/users" % a.id), 403, "TWO_FACTOR_REQUIRED")


# ---- better-auth's own client (twoFactorClient), codes by the otpauth package ----

def test_better_auth_two_factor_client():
    import json
    import subprocess
    from helpers import BASE_URL
    here = os.path.dirname(os.path.abspath(__file__))
    for pkg in ("better-auth", "otpauth"):
        assert os.path.isdir(os.path.join(here, "node_modules", pkg)), \
            "run `npm ci` in tests/api first (scripts/test does)"
    email = unique_email("batf")
    p = subprocess.run(["node", os.path.join(here, "better_auth_two_factor.js"), BASE_URL,
                        "http://trusted.example", email, PASSWORD],
                       capture_output=True, text=True, timeout=120, cwd=here)
    out = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {}
    assert p.returncode == 0 and out.get("ok"), (p.stdout, p.stderr)
    s = out["steps"]
    assert s["enable"] == {"backupCodes": 10, "algorithm": "SHA1", "digits": 6, "period": 30}
    assert s["verifySetup"] == {"status": True}
    assert s["signIn"] == {"twoFactorRedirect": True, "redirects": 1, "hasTwoFactorCookie": True,
                           "hasSession": False}
    assert s["verifyTotp"]["userEmail"] == email and s["sessionAfterTotp"] == email
    assert s["verifyBackupCode"]["userEmail"] == email and s["sessionAfterBackup"] == email
    assert s["backupAgain"]["status"] == 401, s["backupAgain"]
    assert s["redirects"] == 3


# ---- TWO_FACTOR_ENCRYPTION_KEY ----

def test_malformed_key_is_refused_at_start():
    from test_startup_config import coachd_env, run_coachd
    for bad in ("abc", "g" * 64, "0" * 63):
        rc, err, _ = run_coachd(coachd_env(TWO_FACTOR_ENCRYPTION_KEY=bad), timeout=10)
        assert rc == 1, err[-2000:]
        assert any("config:" in line and "TWO_FACTOR_ENCRYPTION_KEY" in line
                   for line in err.splitlines()), err[-2000:]
        assert bad not in err  # the key is never echoed


def test_production_without_key_offers_no_setup():
    import requests
    from helpers import DATABASE_URL, MAIL_DIR, SESSION_COOKIE, free_port, second_coachd
    c, _ = sign_up(email=unique_email("tfprod"))
    cookie = {"Cookie": "%s=%s" % (SESSION_COOKIE, c.session_token)}
    common = dict(DATABASE_URL=DATABASE_URL, APP_ENV="production", CLIENT_KEY="k",
                  FRONTEND_URL="http://app.example", MAIL_DIR=MAIL_DIR,
                  TRUSTED_ORIGINS="http://app.example")
    port = free_port()
    with second_coachd(PORT=port, PUBLIC_URL="http://127.0.0.1:%d" % port,
                       TWO_FACTOR_ENCRYPTION_KEY=None, **common) as base:
        r = requests.post(base + TF + "/enable", json={"password": PASSWORD}, headers=cookie,
                          timeout=15)
        err = assert_error(r, 503, "UNAVAILABLE")
        assert "TWO_FACTOR_ENCRYPTION_KEY" in err["message"]
    port = free_port()
    key = os.urandom(32).hex()
    with second_coachd(PORT=port, PUBLIC_URL="http://127.0.0.1:%d" % port,
                       TWO_FACTOR_ENCRYPTION_KEY=key, **common) as base:
        r = requests.post(base + TF + "/enable", json={"password": PASSWORD}, headers=cookie,
                          timeout=15)
        assert r.status_code == 200, r.text
        secret = secret_of(r.json()["totpURI"])
    # Sealed under that key: the development key of the main server does not open it.
    err = assert_error(c.post(TF + "/get-totp-uri", json={"password": PASSWORD}), 500, "INTERNAL")
    assert secret not in err["message"]
