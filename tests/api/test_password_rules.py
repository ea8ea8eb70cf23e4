"""Password rules (docs/api.md "Password rules"): every place that sets a password refuses the
10,000 most common passwords and passwords holding the service's name, the email's local part or
the first or last name, with 400 VALIDATION_ERROR whose one detail names the password field and
the rule; a strong password passes. Changing and resetting a password mail the owner a notice in
their language, without any secret. None of the passwords sent here reaches the log."""
import os
import subprocess

import pytest

from helpers import (PASSWORD, Client, assert_error, psql_value, sign_in, sign_up,
                     unique_email)
from orgs import new_org

FIRST, LAST = "Quentin", "Marlowe"
# The local part of every account here starts with this word (unique_email adds -<hex>).
LOCAL = "zephyrine"
STRONG = "plum tractor 47 sings"

COMMON_MSG = "is one of the 10,000 most common passwords"
# (password, what the message must say): each breaks exactly one rule.
REFUSED = [
    ("iloveyou", COMMON_MSG),          # rank 47 of the list
    ("SunShine", COMMON_MSG),          # the list is compared case-insensitively
    ("123456", None),                  # too short: the length rule answers first
    ("my Zephyrine 77 pass", "must not contain your email address"),
    ("QUENTIN and the sea", "must not contain your first or last name"),
    ("dear marlowe 2 go", "must not contain your first or last name"),
    ("best CoachD pass 91", "must not contain the name of the service (coachd)"),
]
SENT = set()


def refused(r, key, message):
    err = assert_error(r, 400, "VALIDATION_ERROR")
    assert [d["field"] for d in err["details"]] == [key], err
    if message:
        assert message in err["details"][0]["message"], err
    return err


def check_route(submit, key, ok_status):
    """submit(password) -> response, for one account whose email starts with LOCAL and whose
    name is FIRST LAST."""
    for pw, message in REFUSED:
        SENT.add(pw)
        refused(submit(pw), key, message or "8 to 128 characters")
    r = submit(STRONG)
    assert r.status_code in ((ok_status,) if isinstance(ok_status, int) else ok_status), r.text


# ---- each route that sets a password ----------------------------------------------------------


def test_sign_up():
    email = unique_email(LOCAL)
    check_route(lambda pw: Client().post("/api/auth/sign-up/email", json={
        "email": email, "password": pw, "name": "%s %s" % (FIRST, LAST)}), "password", 200)
    sign_in(email, STRONG)


def test_first_run():
    # In the whole suite the platform is set up already (test_00_setup.py): a password that
    # passes every rule then meets the 409; alone, this file's run creates the administrator.
    email = unique_email(LOCAL)
    check_route(lambda pw: Client().post("/api/setup/first-run", json={
        "email": email, "password": pw, "name": "%s %s" % (FIRST, LAST)}), "password",
        (201, 409))


def test_staff_created_user():
    m = new_org(roles=("Manager",)).clients["Manager"]
    email = unique_email(LOCAL)
    check_route(lambda pw: m.post("/api/users", json={
        "email": email, "firstName": FIRST, "lastName": LAST, "password": pw}), "password", 201)
    sign_in(email, STRONG)


def test_invite_accept_creating_the_account(mail):
    org = new_org(roles=("Manager",))
    email = unique_email(LOCAL)
    org.clients["Manager"].post_json("/api/organizations/%s/invites" % org.id,
                                     {"email": email, "roleInOrganization": "Coach"}, expect=201)
    token = mail.wait_for(email).token("/invite")
    check_route(lambda pw: Client().post("/api/invites/accept", json={
        "token": token, "firstName": FIRST, "lastName": LAST, "password": pw}), "password", 200)
    sign_in(email, STRONG)


@pytest.mark.parametrize("path", ["/api/users/me/password", "/api/auth/change-password"])
def test_change_password(path):
    email = unique_email(LOCAL)
    c, _ = sign_up(email=email, name="%s %s" % (FIRST, LAST))
    check_route(lambda pw: c.post(path, json={"currentPassword": PASSWORD, "newPassword": pw}),
                "newPassword", 200)
    sign_in(email, STRONG)


def test_reset_password(mail):
    email = unique_email(LOCAL)
    sign_up(email=email, name="%s %s" % (FIRST, LAST))
    Client().post_json("/api/auth/forget-password", {"email": email})
    token = mail.wait_for(email, subject="Reset your password").token("token=")
    # A refusal leaves the token usable: the last, strong attempt uses the same one.
    check_route(lambda pw: Client().post("/api/auth/reset-password", json={
        "token": token, "newPassword": pw}), "newPassword", 200)
    sign_in(email, STRONG)


def test_context_words_are_the_accounts_own():
    """Another account's name and short parts (under 4 characters) are not refused."""
    email = unique_email("al")
    c, _ = sign_up(email=email, name="Al Li", password="quentin marlowe al li")
    c.post_json("/api/users/me/password",
                {"currentPassword": "quentin marlowe al li", "newPassword": "zephyrine 77 al"})


def test_first_run_command_line():
    binary = os.environ.get("COACHD_BIN", "build/coachd")
    # The rules run before any database is touched: an unreachable one must not be reached.
    env = dict(os.environ, DATABASE_URL="postgresql://127.0.0.1:1/none")
    for pw, message in (("iloveyou", COMMON_MSG),
                        ("Quentin rules 4ever", "must not contain your first or last name")):
        SENT.add(pw)
        r = subprocess.run([binary, "first-run", "--email", unique_email(LOCAL), "--name",
                            "%s %s" % (FIRST, LAST)], input=pw + "\n", capture_output=True,
                           text=True, env=env, timeout=60)
        assert r.returncode == 2 and message in r.stderr, r


# ---- notices by mail --------------------------------------------------------------------------

SECRET_MARKS = ("token", "http://", "https://")


def no_secret(m, *passwords):
    for pw in passwords:
        assert pw not in m.text and pw not in m.html, m
    for mark in SECRET_MARKS:
        assert mark not in m.text.lower(), (mark, m.text)


@pytest.mark.parametrize("lang,subject,line", [
    ("en", "Your password was changed", "If it was not, reset your password"),
    ("es", "Tu contraseña se ha cambiado", "Si no, restablece tu contraseña"),
])
def test_change_mails_a_notice(mail, lang, subject, line):
    email = unique_email("notice")
    c, _ = sign_up(email=email, lang=lang)
    # A refused change (wrong current password) sends nothing.
    assert_error(c.post("/api/users/me/password",
                        json={"currentPassword": "not the password", "newPassword": STRONG}), 400)
    c.post_json("/api/users/me/password", {"currentPassword": PASSWORD, "newPassword": STRONG})
    m = mail.wait_for(email, subject=subject)
    assert line in m.text and line in m.html, m.text
    assert '<html lang="%s">' % lang in m.html
    no_secret(m, PASSWORD, STRONG)
    assert len([x for x in mail.all_to(email) if x.subject == subject]) == 1
    assert int(psql_value("SELECT count(*) FROM outbox WHERE payload->>'to' = :'e'"
                          " AND payload->>'subject' = :'s'", e=email, s=subject)) == 1


@pytest.mark.parametrize("lang,subject,line", [
    ("en", "Your password was reset", "contact your organization's administrator"),
    ("es", "Tu contraseña se ha restablecido", "contacta con el administrador"),
])
def test_reset_mails_a_notice(mail, lang, subject, line):
    email = unique_email("notice")
    sign_up(email=email, lang=lang)
    Client().post_json("/api/auth/forget-password", {"email": email})
    reset_subject = "Reset your password" if lang == "en" else "Restablece tu contraseña"
    token = mail.wait_for(email, subject=reset_subject).token("token=")
    # A refused reset sends nothing; the accepted one sends one notice.
    refused(Client().post("/api/auth/reset-password",
                          json={"token": token, "newPassword": "iloveyou"}), "newPassword",
            COMMON_MSG)
    Client().post_json("/api/auth/reset-password", {"token": token, "newPassword": STRONG})
    m = mail.wait_for(email, subject=subject)
    assert line in m.text, m.text
    assert '<html lang="%s">' % lang in m.html
    no_secret(m, PASSWORD, STRONG, token)
    assert len([x for x in mail.all_to(email) if x.subject == subject]) == 1


# ---- last: nothing sent here reached the log --------------------------------------------------


def test_zz_no_password_in_the_log():
    path = os.environ.get("COACHD_LOG_FILE")
    if not path or not SENT:
        pytest.skip("COACHD_LOG_FILE is not set or no test above ran")
    log = open(path, encoding="utf-8", errors="replace").read()
    for pw in SENT | {STRONG}:
        assert pw not in log, pw
