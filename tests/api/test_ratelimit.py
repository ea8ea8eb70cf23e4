"""Rate limits: the stricter auth limiter (per client IP and per email) and the optional global
per-IP limiter. They run on a second coachd started here with small limits (the main test
server keeps a generous one so the suite's sign-ups are not throttled), on its own Redis
database so the counts are its own."""
import os
import subprocess
from urllib.parse import urlsplit

import pytest
import requests

from helpers import (PASSWORD, SourceAddressAdapter, assert_error, loopback_ip, second_coachd,
                     sign_up, unique_email)


def client_from(ip):
    s = requests.Session()
    s.mount("http://", SourceAddressAdapter(ip))
    return s


def limited(r, what):
    """The 429's message names the limit and its reset, in the seconds Retry-After gives."""
    err = assert_error(r, 429, "RATE_LIMITED")
    secs = r.json()["retryAfterSeconds"]
    assert r.headers["Retry-After"] == str(secs)
    assert err["message"] == "Too many %s; try again in %d second%s" % (
        what, secs, "" if secs == 1 else "s"), err["message"]
    return secs


@pytest.fixture(scope="module")
def limited_server():
    redis_url = os.environ["COACHD_REDIS_URL"].rsplit("/", 1)[0] + "/3"
    subprocess.run(["redis-cli", "-u", redis_url, "FLUSHDB"], check=True, capture_output=True)
    with second_coachd(host="0.0.0.0", REDIS_URL=redis_url,
                       AUTH_RATE_LIMIT_POINTS=3, AUTH_RATE_LIMIT_DURATION=60,
                       RATE_LIMITER_ENABLED="true", RATE_LIMITER_POINTS=20,
                       RATE_LIMITER_DURATION=60) as base:
        yield urlsplit(base).port


def test_auth_limit_per_ip_and_per_email(limited_server):
    base = "http://127.0.0.2:%d" % limited_server
    victim = unique_email("victim")
    sign_up(email=victim)
    a = client_from("127.0.0.2")
    for _ in range(3):
        r = a.post(base + "/api/auth/sign-in/email", json={"email": victim, "password": "wrong-pass"})
        assert r.status_code == 401, r.text
    r = a.post(base + "/api/auth/sign-in/email", json={"email": victim, "password": PASSWORD})
    # the fourth attempt from this address for this email: both counts are over
    secs = limited(r, "sign-in attempts from this address and for this email address: "
                      "at most 3 per 60 seconds")
    assert 0 < secs <= 60
    # Another address from the same IP is limited too (per IP)...
    r = a.post(base + "/api/auth/sign-in/email", json={"email": unique_email(), "password": "x" * 8})
    limited(r, "sign-in attempts from this address: at most 3 per 60 seconds")
    # ...and the same email from another IP (per email).
    b = client_from("127.0.0.4")
    r = b.post("http://127.0.0.4:%d/api/auth/sign-in/email" % limited_server,
               json={"email": victim, "password": PASSWORD})
    limited(r, "sign-in attempts for this email address: at most 3 per 60 seconds")


def test_global_limiter_per_ip(limited_server):
    base = "http://127.0.0.3:%d" % limited_server
    c = client_from("127.0.0.3")
    answers = [c.get(base + "/api/auth/session") for _ in range(21)]
    codes = [r.status_code for r in answers]
    assert codes[:20] == [200] * 20 and codes[20] == 429, codes
    assert 0 < limited(answers[20], "requests from this address: at most 20 per 60 seconds") <= 60
    other = client_from("127.0.0.5")
    assert other.get("http://127.0.0.5:%d/api/auth/session" % limited_server).status_code == 200


def test_development_default_auth_limit_is_100_per_60_seconds():
    """Without AUTH_RATE_LIMIT_POINTS, development allows 100 per window (production 10: the
    config unit test): forget-password (no hashing) 100 times from one address, then 429."""
    ip = loopback_ip()
    with second_coachd(host="0.0.0.0", APP_ENV="development", AUTH_RATE_LIMIT_POINTS=None,
                       AUTH_RATE_LIMIT_DURATION=None) as base:
        c = client_from(ip)
        url = "http://%s:%d/api/auth/forget-password" % (ip, urlsplit(base).port)
        codes = [c.post(url, json={"email": unique_email("nobody")}).status_code
                 for _ in range(100)]
        assert codes == [200] * 100, codes
        r = c.post(url, json={"email": unique_email("nobody")})
        secs = limited(r, "password-reset requests from this address: at most 100 per 60 seconds")
        assert 0 < secs <= 60
