"""Invites on a second coachd started with APP_ENV=production and a small auth limit: no
inviteToken in the create response, and the invite-accept limiter. It shares the main
server's database (organizations are made through the main server) and uses its own
Redis database."""
import os
import re
import subprocess

import pytest
import requests

from helpers import (DATABASE_URL, MAIL_DIR, PASSWORD, SESSION_COOKIE, Client, MailBox,
                     assert_error, free_port, psql, second_coachd, unique_email, wait_until)
from orgs import new_org


@pytest.fixture(scope="module")
def prod_server():
    redis_url = os.environ["COACHD_REDIS_URL"].rsplit("/", 1)[0] + "/4"
    subprocess.run(["redis-cli", "-u", redis_url, "FLUSHDB"], check=True, capture_output=True)
    port = free_port()
    with second_coachd(host="0.0.0.0", PORT=port, REDIS_URL=redis_url,
                       DATABASE_URL=DATABASE_URL, APP_ENV="production", CLIENT_KEY="k",
                       PUBLIC_URL="http://127.0.0.1:%d" % port,
                       FRONTEND_URL="http://app.example", MAIL_DIR=MAIL_DIR,
                       TRUSTED_ORIGINS="http://app.example",
                       AUTH_RATE_LIMIT_POINTS=3, AUTH_RATE_LIMIT_DURATION=60) as base:
        yield base


def test_production_hides_invite_token(prod_server):
    org = new_org(roles=("OrganizationAdmin",))
    admin = org.clients["OrganizationAdmin"]
    # The session cookie is Secure in production, so send it by hand over plain HTTP.
    cookie = "%s=%s" % (SESSION_COOKIE, admin.session_token)
    email = unique_email("prod")
    r = requests.post(prod_server + "/api/organizations/%s/invites" % org.id,
                      json={"email": email, "roleInOrganization": "Teacher"},
                      headers={"Cookie": cookie}, timeout=15)
    assert r.status_code == 201, r.text
    d = r.json()["data"]
    assert "inviteToken" not in d and d["status"] == "pending"
    r = requests.post(prod_server + "/api/organizations/%s/invites" % org.id,
                      json={"email": email, "roleInOrganization": "Teacher"},
                      headers={"Cookie": cookie}, timeout=15)
    assert r.status_code == 200 and "inviteToken" not in r.json()["data"]
    # Both mails carry a FRONTEND_URL link (whichever server sent them; a sent row keeps no
    # body); the resend's token is the one that resolves.
    assert psql("SELECT count(*) FROM outbox WHERE payload->>'to' = :'e'", e=email) == [("2",)]
    wait_until(lambda: len(MailBox().all_to(email)) == 2, timeout=60, what="both invite mails")
    mails = MailBox().all_to(email)
    tokens = [re.search(r"http://app\.example/invite\?token=([A-Za-z0-9_-]+)", m.text).group(1)
              for m in mails]
    infos = [Client().get("/api/invites/%s" % t) for t in tokens]
    live = [r.json()["data"] for r in infos if r.status_code == 200]
    assert len(live) == 1 and live[0]["isAvailable"] is True and live[0]["email"] == email


def test_invite_accept_is_rate_limited(prod_server):
    s = requests.Session()
    body = {"token": "x" * 43, "firstName": "A", "lastName": "B", "password": PASSWORD,
            "email": unique_email("limited")}
    for _ in range(3):
        assert_error(s.post(prod_server + "/api/invites/accept", json=body, timeout=15), 400)
    r = s.post(prod_server + "/api/invites/accept", json=body, timeout=15)
    assert_error(r, 429, "RATE_LIMITED")
    assert r.headers.get("Retry-After")
