"""LOG_FORMAT=json: one JSON object per line, access records with request id, method, route
pattern, status, duration and user id, never tokens or emails; X-Request-Id kept when valid."""
import json
import os
import subprocess
import tempfile
import time

import requests

from helpers import PASSWORD, ROOT, Client, free_port, unique_email


def start(env_extra):
    env = dict(os.environ)
    for var in ("DATABASE_URL", "REDIS_URL", "MAIL_DIR", "CLIENT_KEY"):
        if os.environ.get("COACHD_" + var):
            env.setdefault(var, os.environ["COACHD_" + var])
    port = free_port()
    env.update(PORT=str(port), HOST="127.0.0.1", WORKERS="1", **env_extra)
    log = tempfile.NamedTemporaryFile(delete=False)
    binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
    proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=log)
    base = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 20
    while True:
        try:
            requests.get(base + "/api/auth/session", timeout=1)
            return proc, base, log.name
        except (requests.ConnectionError, requests.Timeout):
            assert time.monotonic() < deadline and proc.poll() is None, open(log.name).read()
            time.sleep(0.1)


def test_json_logs_and_request_id():
    proc, base, logname = start({"LOG_FORMAT": "json"})
    try:
        c = Client(base_url=base)
        email = unique_email("jsonlog")
        r = c.post("/api/auth/sign-up/email",
                   json={"email": email, "password": PASSWORD, "name": "Json Log"},
                   headers={"X-Request-Id": "trace-abc.123_X:1"})
        assert r.status_code == 200, r.text
        assert r.headers["X-Request-Id"] == "trace-abc.123_X:1"
        uid = r.json()["user"]["id"]
        token = c.session_token
        r = c.get("/api/users/me", headers={"X-Request-Id": "bad id<script>"})
        own_id = r.headers["X-Request-Id"]
        assert own_id != "bad id<script>" and len(own_id) == 16
        long_id = "a" * 65
        assert c.get("/api/users/me", headers={"X-Request-Id": long_id}).headers[
            "X-Request-Id"] != long_id
        c.get("/api/invites/%s" % ("Z" * 43))  # a token in the path
        c.get("/api/auth/verify-email?token=secret-verify-token")
    finally:
        proc.terminate()
        assert proc.wait(timeout=15) == 0
    text = open(logname).read()
    os.unlink(logname)
    lines = text.splitlines()
    assert lines
    recs = [json.loads(line) for line in lines]  # every line is one JSON object
    for rec in recs:
        assert {"time", "level", "pid", "msg"} <= rec.keys(), rec
    access = [r for r in recs if r["msg"] == "request"]
    signup = [r for r in access if r["requestId"] == "trace-abc.123_X:1"]
    assert len(signup) == 1
    s = signup[0]
    assert s["method"] == "POST" and s["route"] == "/api/auth/sign-up/email"
    assert s["status"] == 200 and isinstance(s["durationMs"], float)
    me = [r for r in access if r["requestId"] == own_id][0]
    assert me["route"] == "/api/users/me" and me["userId"] == uid and me["status"] == 200
    inv = [r for r in access if r["route"] == "/api/invites/:token"]
    assert inv and inv[0]["userId"] is None
    # Never tokens or emails.
    assert email not in text and token not in text
    assert "Z" * 43 not in text and "secret-verify-token" not in text
