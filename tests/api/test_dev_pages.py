"""The development pages (docs/api.md "Development pages"): in development without FRONTEND_URL
(as scripts/test runs the server) the email links lead to PUBLIC_URL, where coachd serves
/email-verification, /reset-password and /invite itself.

- The pages' answers: a strict Content-Security-Policy (no inline script or style), nosniff,
  no-store, the embedded script and stylesheet.
- In headless Chromium (dev_pages.js, one browser for every flow), following the links of the
  mails the suite's SMTP sink received: verification (success in en and es, a bad token), the
  password reset (a mismatch refused by the page, the new password works and the old one does
  not, a bad token shows the API's message), invites (sign up through the invite; sign in as an
  existing user and accept; decline, in Spanish; an unknown token). No page error, no CSP
  violation, no console error but the failed fetches a flow expects, no request leaving the
  origin; screenshots under COACHD_TEST_ARTIFACTS (dev-*.png).
- Off: a production server and a development server with FRONTEND_URL answer 404 on every
  path of the pages (production without FRONTEND_URL does not start: test_startup_config.py).
- test_browser_check_fails_on_a_wrong_expectation shows the browser checks can fail."""
import json
import os
import re
import subprocess
import tempfile
from urllib.parse import quote, urlsplit

import pytest

from helpers import (BASE_URL, PASSWORD, ROOT, Client, artifacts_dir, assert_error, free_port,
                     parse_csp, psql_value, second_coachd, sign_in, sign_up, unique_email)
from orgs import new_org

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# The links' host: the browser must be on PUBLIC_URL's origin (the trusted one, the cookie's).
PUBLIC = (os.environ.get("PUBLIC_URL") or BASE_URL.replace("127.0.0.1", "localhost")).rstrip("/")
PAGES = ("/email-verification", "/reset-password", "/invite")
ASSETS = {"/dev-pages/dev.js": ("application/javascript; charset=utf-8", "dev_pages.js"),
          "/dev-pages/dev.css": ("text/css; charset=utf-8", "dev_pages.css")}
CSP = {
    "default-src": ["'none'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["data:"],
    "connect-src": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
    "base-uri": ["'none'"],
}
NEW_PASSWORD = "a brand new passphrase"
# Markup, a script of the page's own origin and replacement patterns, where the pages show text.
HOSTILE = '<img src=/x-hostile onerror="document.title=1"><script src=/dev-pages/dev.js></script>{org}$&'
# A failed fetch the page expects (a bad token's 400 or 404) is logged by Chromium as this.
FAILED_FETCH = re.compile(r"^Failed to load resource: the server responded with a status of "
                          r"(400|404) ")


def on_public(link):
    """A mail's link must lead to this server through PUBLIC_URL."""
    assert link.startswith(PUBLIC + "/"), (link, PUBLIC)
    return link


# ---- the answers ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_page_is_served_with_a_strict_csp_and_no_inline_code(path):
    r = Client().get(path + "?lang=es&token=x")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert parse_csp(r.headers["Content-Security-Policy"]) == CSP
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Cache-Control"] == "no-store"
    assert r.headers["Referrer-Policy"] == "no-referrer"
    html = r.text
    # The same shell whatever the query: nothing of the request is in it.
    assert html == open(os.path.join(ROOT, "routes", "dev_pages.html"), encoding="utf-8").read()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts == [(' src="/dev-pages/dev.js" defer', "")], scripts
    assert "<style" not in html and not re.search(r"\s(on\w+|style)=", html)


@pytest.mark.parametrize("path", sorted(ASSETS))
def test_assets_are_the_embedded_files(path):
    ctype, name = ASSETS[path]
    r = Client().get(path)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == ctype
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.content == open(os.path.join(ROOT, "routes", name), "rb").read()


def test_pages_are_not_in_the_api_document():
    doc = json.load(open(os.path.join(ROOT, "docs", "openapi.json"), encoding="utf-8"))
    assert not [p for p in doc["paths"] if p in PAGES or p.startswith("/dev-pages")]


@pytest.mark.parametrize("env", [
    {"APP_ENV": "production", "FRONTEND_URL": "http://app.example",
     "TRUSTED_ORIGINS": "http://app.example"},
    {"APP_ENV": "development", "FRONTEND_URL": "http://app.example"},
], ids=["production", "development-with-FRONTEND_URL"])
def test_pages_are_off_with_a_frontend_url(env):
    port = free_port()
    with second_coachd(PORT=port, PUBLIC_URL="http://127.0.0.1:%d" % port, **env) as base:
        c = Client(base_url=base, source_ip=False)
        for path in PAGES + tuple(ASSETS):
            assert_error(c.get(path), 404, "NOT_FOUND")
        # The email links lead to FRONTEND_URL there.
        r = c.get("/api/auth/verify-email?token=nonsense", allow_redirects=False)
        assert r.headers["Location"] == "http://app.example/email-verification?lang=en&error=invalid_token"


# ---- in the browser ---------------------------------------------------------------------------


def run_flows(flows):
    assert os.path.isfile(CHROMIUM), "Chromium is missing (scripts/lib/deps.sh installs it)"
    assert os.path.isdir(os.path.join(HERE, "node_modules", "playwright-core")), \
        "run `npm ci` in tests/api first (scripts/test does)"
    with tempfile.NamedTemporaryFile("w", suffix=".json") as plan:
        json.dump(flows, plan)
        plan.flush()
        out = subprocess.run(["node", os.path.join(HERE, "dev_pages.js"), plan.name],
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return {r["name"]: r for r in json.loads(out.stdout)}


def outcome(shot=None):
    """Steps that wait for the page's outcome and record it (and a screenshot)."""
    steps = [{"wait": "#result[data-state]"}, {"text": "#title", "as": "title"},
             {"attr": "#result", "name": "data-state", "as": "state"},
             {"text": "#result", "as": "result"}, {"attr": "html", "name": "lang", "as": "lang"}]
    if shot:
        steps.append({"screenshot": os.path.join(artifacts_dir(), shot)})
    return steps


def invite_link(org, email, role, mail):
    org.clients["OrganizationAdmin"].post_json(
        "/api/organizations/%s/invites" % org.id, {"email": email, "roleInOrganization": role},
        expect=201)
    return on_public(mail.wait_for(email, subject=org.name).link("/invite?token="))


def membership(org_id, email):
    return psql_value("SELECT m.role_in_organization FROM organization_memberships m"
                      " JOIN users u ON u.id = m.user_id"
                      " WHERE m.organization_id = :'o' AND u.email = :'e'", o=org_id, e=email)


@pytest.fixture(scope="module")
def browser(mail):
    """Every flow prepared through the API and the mails, then run in one browser."""
    ctx, flows = {}, []

    # Verification: the link of the sign-up mail, in English and (profile language) in Spanish.
    for key, lang in (("verify", None), ("verify_es", "es")):
        email = unique_email("dev-" + key)
        sign_up(email=email, lang=lang)
        ctx[key] = email
        link = on_public(mail.wait_for(email).link("/api/auth/verify-email"))
        flows.append({"name": key, "steps": [{"goto": link}] + outcome(
            "dev-email-verification.png" if key == "verify" else None)})
    flows.append({"name": "verify_bad", "steps": [
        {"goto": PUBLIC + "/api/auth/verify-email?token=nonsense"}] + outcome()})

    # Password reset: first a mismatch the page refuses itself, then the new password.
    email = unique_email("dev-reset")
    sign_up(email=email)
    Client().post_json("/api/auth/forget-password", {"email": email})
    ctx["reset"] = email
    link = on_public(mail.wait_for(email, subject="password").link("/reset-password?token="))
    flows.append({"name": "reset", "steps": [
        {"goto": link}, {"wait": "#reset-form"},
        {"fill": "#password", "value": NEW_PASSWORD}, {"fill": "#confirm", "value": "different!"},
        {"click": "#save"}, {"wait": "#result[data-state=error]"},
        {"text": "#result", "as": "mismatch"},
        {"fill": "#confirm", "value": NEW_PASSWORD}, {"click": "#save"},
        {"wait": "#result[data-state=ok]"}] + outcome("dev-reset-password.png")})
    flows.append({"name": "reset_bad", "steps": [
        {"goto": PUBLIC + "/reset-password?token=" + "A" * 43}, {"wait": "#reset-form"},
        {"fill": "#password", "value": NEW_PASSWORD}, {"fill": "#confirm", "value": NEW_PASSWORD},
        {"click": "#save"}] + outcome()})

    # Invites of one organization: a new address signs up through the page; an existing
    # account signs in and accepts; another declines, in Spanish.
    org = new_org(roles=("OrganizationAdmin",))
    ctx["org"] = org
    new = ctx["invite_new"] = unique_email("dev-invitee")
    link = invite_link(org, new, "Coach", mail)
    flows.append({"name": "invite_new", "steps": [
        {"goto": link}, {"wait": "#signup-form"},
        {"text": "#invite-org", "as": "org"}, {"text": "#invite-role", "as": "role"},
        {"text": "#invite-email", "as": "email"}, {"text": "#invite-status", "as": "status"},
        {"fill": "#first-name", "value": "Nora"}, {"fill": "#last-name", "value": "Newcomer"},
        {"fill": "#signup-password", "value": PASSWORD},
        {"fill": "#signup-confirm", "value": PASSWORD},
        {"click": "#sign-up"}] + outcome("dev-invite-signup.png") + [
        # Signed in now, and the invite is used: the link shows it as accepted.
        {"goto": link}, {"wait": "#result[data-state=error]"},
        {"attr": "#invite-status", "name": "data-status", "as": "after"}]})
    # After accepting, the same browser opens an invite for someone else: it says so and
    # offers to sign out, which leads to that invite's sign-up form.
    other = ctx["invite_other"] = unique_email("dev-other")
    other_link = invite_link(org, other, "Coach", mail)
    # The decline is a Spanish speaker's: the mail, and so its link, carry lang=es.
    for key, role, answer, lang in (("invite_accept", "Teacher", "#accept", "en"),
                                    ("invite_decline", "Manager", "#decline", "es")):
        email = ctx[key] = unique_email("dev-" + key)
        sign_up(email=email, name="Existing Person", lang=lang)
        link = invite_link(org, email, role, mail)
        assert "&lang=" + lang in link, link
        flows.append({"name": key, "steps": [
            {"goto": link}, {"wait": "#signin-form"},
            {"fill": "#signin-password", "value": PASSWORD}, {"click": "#sign-in"},
            {"wait": answer}, {"text": "#signed-in", "as": "signedIn"},
            {"text": answer, "as": "button"}] + (
            [{"screenshot": os.path.join(artifacts_dir(), "dev-invite.png")}]
            if key == "invite_accept" else []) + [
            {"click": answer}] + outcome() + [
            {"attr": "#invite-status", "name": "data-status", "as": "status"}] + (
            [{"goto": other_link}, {"wait": "#sign-out"}, {"text": "#other-user", "as": "other"},
             {"click": "#sign-out"}, {"wait": "#signup-form"},
             {"text": "#invite-email", "as": "otherEmail"}]
            if key == "invite_accept" else [])})
    flows.append({"name": "invite_bad", "steps": [
        {"goto": PUBLIC + "/invite?token=" + "A" * 43}] + outcome()})

    # Markup where the page shows text: an organization's name, the error of the query.
    org = new_org(roles=("OrganizationAdmin",), name="Org " + HOSTILE)
    ctx["hostile_org"] = org
    link = invite_link(org, unique_email("dev-hostile"), "Coach", mail)
    flows.append({"name": "hostile_org", "steps": [
        {"goto": link}, {"wait": "#signup-form"}, {"text": "#invite-org", "as": "org"},
        {"text": "title", "as": "docTitle"}]})
    flows.append({"name": "hostile_error", "steps": [
        {"goto": PUBLIC + "/email-verification?lang=%3Cb%3E&error=" + quote(HOSTILE)}]
        + outcome() + [{"text": "title", "as": "docTitle"}]})

    # The server answers the pages on variants of their paths too (a trailing slash, doubled
    # slashes, an escaped letter): each shows its own page, never another's outcome.
    flows.append({"name": "variant_reset", "steps": [
        {"goto": PUBLIC + "/reset-password/?token=" + "A" * 43}, {"wait": "#reset-form"},
        {"text": "#title", "as": "title"}]})
    flows.append({"name": "variant_invite", "steps": [
        {"goto": PUBLIC + "//invite?token=" + "A" * 43}] + outcome()})
    flows.append({"name": "variant_verify", "steps": [
        {"goto": PUBLIC + "/%65mail-verification/?error=token_expired"}] + outcome()})

    # A flow that must fail (test_browser_check_fails_on_a_wrong_expectation): the expired link
    # shows an error, and the flow waits for success.
    flows.append({"name": "must_fail", "steps": [
        {"goto": PUBLIC + "/email-verification?error=token_expired"},
        {"wait": "#result[data-state=ok]", "timeout": 1000}]})

    results = run_flows(flows)
    return ctx, results


def clean(r, expected_failures=0):
    """No page error, CSP violation or request off the origin; console errors only for the
    failed fetches the flow expects."""
    assert "error" not in r, "%s: %s\npage text: %s" % (r["name"], r["error"], r.get("text"))
    assert r["pageErrors"] == [] and r["violations"] == [], r
    other = [e for e in r["consoleErrors"] if not FAILED_FETCH.match(e)]
    assert other == [], r["consoleErrors"]
    assert len(r["consoleErrors"]) == expected_failures, r["consoleErrors"]
    origin = urlsplit(PUBLIC)
    outside = [u for u in r["requests"]
               if (urlsplit(u.split(" ", 1)[1]).scheme, urlsplit(u.split(" ", 1)[1]).netloc)
               != (origin.scheme, origin.netloc)]
    assert outside == [], outside
    return r["values"]


def test_verification_link_shows_success_and_verifies(browser):
    ctx, results = browser
    v = clean(results["verify"])
    assert urlsplit(results["verify"]["url"]).path == "/email-verification"
    assert v["state"] == "ok" and v["lang"] == "en", v
    assert v["title"] == "Email address verified"
    assert "Your email address is confirmed" in v["result"]
    assert psql_value("SELECT email_verified FROM users WHERE email = :'e'",
                      e=ctx["verify"]) == "t"
    assert os.path.getsize(os.path.join(artifacts_dir(), "dev-email-verification.png")) > 5000


def test_verification_in_spanish(browser):
    ctx, results = browser
    v = clean(results["verify_es"])
    assert "lang=es" in results["verify_es"]["url"]
    assert v["state"] == "ok" and v["lang"] == "es", v
    assert v["title"] == "Correo electrónico verificado"
    assert "está confirmada" in v["result"]


def test_bad_verification_link_shows_the_error(browser):
    _, results = browser
    v = clean(results["verify_bad"])
    assert "error=invalid_token" in results["verify_bad"]["url"]
    assert v["state"] == "error" and v["title"] == "This link is not valid", v
    assert "unknown or was already used" in v["result"]


def test_reset_form_sets_the_new_password(browser):
    ctx, results = browser
    v = clean(results["reset"])
    assert v["mismatch"] == "The two passwords differ.", v
    assert v["state"] == "ok" and "Your password has been changed" in v["result"], v
    # The mismatch never reached the server: one reset request, the right one.
    posts = [u for u in results["reset"]["requests"] if u.startswith("POST ")]
    assert posts == ["POST %s/api/auth/reset-password" % PUBLIC], posts
    sign_in(ctx["reset"], NEW_PASSWORD)
    sign_in(ctx["reset"], PASSWORD, expect=401)


def test_reset_with_a_bad_token_shows_the_api_message(browser):
    _, results = browser
    v = clean(results["reset_bad"], expected_failures=1)
    assert v["state"] == "error", v
    assert v["result"].startswith("The password could not be changed: Invalid or expired token")


def test_invite_sign_up_through_the_page(browser):
    ctx, results = browser
    r = results["invite_new"]
    v = clean(r)
    assert v["org"] == ctx["org"].name and v["role"] == "Coach", v
    assert v["email"] == ctx["invite_new"] and v["status"] == "Pending", v
    assert v["state"] == "ok", v
    assert v["result"] == "You joined %s as Coach. Signed in as %s." % (ctx["org"].name,
                                                                       ctx["invite_new"])
    assert v["after"] == "accepted", v
    assert membership(ctx["org"].id, ctx["invite_new"]) == "Coach"
    assert psql_value("SELECT first_name || ' ' || last_name FROM users WHERE email = :'e'",
                      e=ctx["invite_new"]) == "Nora Newcomer"
    paths = [u.split(" ", 1)[0] + " " + urlsplit(u.split(" ", 1)[1]).path for u in r["requests"]]
    assert "POST /api/invites/accept" in paths and "POST /api/auth/sign-in/email" in paths


def test_invite_existing_user_signs_in_and_accepts(browser):
    ctx, results = browser
    v = clean(results["invite_accept"])
    assert v["signedIn"] == "Signed in as %s." % ctx["invite_accept"], v
    assert v["button"] == "Accept"
    assert v["state"] == "ok" and v["status"] == "accepted", v
    assert v["result"] == "You joined %s as Teacher." % ctx["org"].name
    assert membership(ctx["org"].id, ctx["invite_accept"]) == "Teacher"
    assert v["other"] == "You are signed in as %s, but this invitation is for %s." % (
        ctx["invite_accept"], ctx["invite_other"])
    assert v["otherEmail"] == ctx["invite_other"]
    assert "POST %s/api/auth/sign-out" % PUBLIC in results["invite_accept"]["requests"]


def test_invite_existing_user_declines_in_spanish(browser):
    ctx, results = browser
    v = clean(results["invite_decline"])
    assert v["lang"] == "es" and v["button"] == "Rechazar", v
    assert v["signedIn"] == "Sesión iniciada como %s." % ctx["invite_decline"]
    assert v["state"] == "ok" and v["status"] == "revoked", v
    assert v["result"] == "Rechazaste la invitación a %s." % ctx["org"].name
    assert membership(ctx["org"].id, ctx["invite_decline"]) is None


def test_unknown_invite_token(browser):
    _, results = browser
    v = clean(results["invite_bad"], expected_failures=1)
    assert v["state"] == "error" and "does not exist" in v["result"], v


def test_markup_from_the_api_and_the_query_stays_text(browser):
    ctx, results = browser
    v = clean(results["hostile_org"])
    assert v["org"] == ctx["hostile_org"].name, v
    assert v["docTitle"] == "Invitation · coachd", v
    v = clean(results["hostile_error"])
    assert v["result"] == "The verification failed (%s)." % HOSTILE, v
    assert v["lang"] == "en" and v["docTitle"] == v["title"] + " · coachd", v
    for name in ("hostile_org", "hostile_error"):
        paths = [urlsplit(u.split(" ", 1)[1]).path for u in results[name]["requests"]]
        assert "/x-hostile" not in paths and paths.count("/dev-pages/dev.js") == 1, paths


def test_path_variants_show_their_own_page(browser):
    v = clean(browser[1]["variant_reset"])
    assert v["title"] == "Choose a new password", v
    v = clean(browser[1]["variant_invite"], expected_failures=1)
    assert v["state"] == "error" and "does not exist" in v["result"], v
    v = clean(browser[1]["variant_verify"])
    assert v["state"] == "error" and v["title"] == "This link has expired", v


def test_browser_check_fails_on_a_wrong_expectation(browser):
    """The flows above can fail: a page that does not show what a step waits for is reported
    with the failing step and the page's text."""
    r = browser[1]["must_fail"]
    assert "#result[data-state=ok]" in r["error"], r
    assert "This link has expired" in r["text"]
    with pytest.raises(AssertionError):
        clean(r)
