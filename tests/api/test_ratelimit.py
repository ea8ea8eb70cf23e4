"""Rate limits: the stricter auth limiter (per client IP and per email) and the optional global
per-IP limiter. They run on a second coachd started here with small limits (the main test
server keeps a generous one so the suite's sign-ups are not throttled), on its own Redis
database so the counts are its own."""
import os
import subprocess
from urllib.parse import urlsplit

import pytest
import requests

from helpers import (PASSWORD, SourceAddressAdapter, assert_error, second_coachd, sign_up,
                     unique_email)


def client_from(ip):
    s = requests.Session()
    s.mount("http://", SourceAddressAdapter(ip))
    return s


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
    err = assert_error(r, 429, "RATE_LIMITED")
    assert err["message"]
    assert 0 < r.json()["retryAfterSeconds"] <= 60 and r.headers["Retry-After"]
    # Another address from the same IP is limited too (per IP)...
    r = a.post(base + "/api/auth/sign-in/email", json={"email": unique_email(), "password": "x" * 8})
    assert_error(r, 429, "RATE_LIMITED")
    # ...and the same email from another IP (per email).
    b = client_from("127.0.0.4")
    r = b.post("http://127.0.0.4:%d/api/auth/sign-in/email" % limited_server,
               json={"email": victim, "password": PASSWORD})
    assert_error(r, 429, "RATE_LIMITED")


def test_global_limiter_per_ip(limited_server):
    base = "http://127.0.0.3:%d" % limited_server
    c = client_from("127.0.0.3")
    codes = [c.get(base + "/api/auth/session").status_code for _ in range(21)]
    assert codes[:20] == [200] * 20 and codes[20] == 429, codes
    other = client_from("127.0.0.5")
    assert other.get("http://127.0.0.5:%d/api/auth/session" % limited_server).status_code == 200
