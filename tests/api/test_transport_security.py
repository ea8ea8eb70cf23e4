"""Transport and parsing defences (docs/security.md "Transport and parsing"): oversized
Content-Length on every path, a crashed worker replaced at once, stream teardown while events
fan out, access-log redaction and escaping, JSON Content-Type, session cookies only on success,
canonical ids in paths, and the readable 413 of a lingering close."""
import json
import os
import random
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from urllib.parse import urlsplit

import requests

from helpers import (BASE_URL, ROOT, SESSION_COOKIE, Client, SSEStream, assert_error, free_port,
                     publish_event, second_coachd, sign_up, wait_until)
from ment_fixtures import make_mentorship
from orgs import new_org

HOST, PORT = urlsplit(BASE_URL).hostname, urlsplit(BASE_URL).port


def raw_request(head, body=b"", host=HOST, port=PORT, timeout=10):
    """Sends head (+ body, ignoring a server that stops reading) on a fresh socket; returns
    (status, headers text, body bytes) of the answer, read until the server closes or the
    Content-Length is complete."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(head.encode() if isinstance(head, str) else head)
        if body:
            s.sendall(body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head_bytes, _, rest = data.partition(b"\r\n\r\n")
        text = head_bytes.decode("latin-1")
        length = None
        for line in text.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        while length is not None and len(rest) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return int(text.split(" ")[1]), text, rest
    finally:
        s.close()


def worker_pid(base=BASE_URL):
    """The pid of the worker that answered: the first 8 hex digits of X-Request-Id."""
    r = requests.get(base + "/api/auth/session", timeout=10)
    return int(r.headers["X-Request-Id"][:8], 16)


# ---- item 1: Content-Length on every path; supervised worker --------------------------------


def test_huge_content_length_is_refused_on_every_path():
    pid = worker_pid()
    junk = b"A" * 65536
    for method, path in (("OPTIONS", "/x"), ("POST", "/api/no-such-route"),
                         ("DELETE", "/api/auth/sign-in/email"), ("OPTIONS", "/api/health")):
        head = "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551615\r\n\r\n" % (
            method, path)
        status, _, body = raw_request(head, junk)
        assert status == 413, (method, path, status)
        assert json.loads(body)["error"]["code"] == "PAYLOAD_TOO_LARGE"
    # The same worker is still there and answers (no crash, no restart).
    assert worker_pid() == pid
    # A small body on an unknown path is still a plain 404.
    status, _, body = raw_request("POST /api/no-such-route HTTP/1.1\r\nHost: x\r\n"
                                  "Content-Length: 2\r\nConnection: close\r\n\r\n{}")
    assert status == 404 and json.loads(body)["error"]["code"] == "NOT_FOUND"


def test_killed_worker_is_replaced_within_a_second():
    with second_coachd(WORKERS=1, allow_worker_death=True) as base:
        old = worker_pid(base)
        os.kill(old, signal.SIGKILL)
        t0 = time.monotonic()
        # The port never goes away: connections made right after the kill are queued for the new
        # worker, never refused.
        r = requests.get(base + "/api/auth/session", timeout=10)
        took = time.monotonic() - t0
        assert r.status_code == 200
        new = int(r.headers["X-Request-Id"][:8], 16)
        assert new != old
        print("killed worker %d; worker %d answered after %.3f s" % (old, new, took))
        assert took < 1.5, "replacement worker answered after %.2f s" % took
        for _ in range(20):
            assert requests.get(base + "/api/auth/session", timeout=5).status_code == 200


def test_ctrl_c_to_the_process_group_drains_and_exits_0():
    """SIGINT reaches the supervisor and the workers at once (Ctrl-C): nobody is restarted and
    the exit status is 0."""
    rc, text = _serve_then(lambda pid: os.killpg(pid, signal.SIGINT))
    assert rc == 0, text[-3000:]
    assert "restarting" not in text


def _serve_then(stop):
    """Starts a WORKERS=2 coachd in a process group of its own, calls stop(its pid) once it
    answers, and returns its exit status and log."""
    env = dict(os.environ)
    for var in ("DATABASE_URL", "REDIS_URL", "MAIL_DIR", "CLIENT_KEY"):
        if os.environ.get("COACHD_" + var):
            env.setdefault(var, os.environ["COACHD_" + var])
    env.update(PORT=str(free_port()), HOST="127.0.0.1", WORKERS="2")
    binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=log,
                                start_new_session=True)
        try:
            base = "http://127.0.0.1:%s" % env["PORT"]
            wait_until(lambda: _answers(base), timeout=20, what="coachd answering")
            stop(proc.pid)
            rc = proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log.seek(0)
        return rc, log.read().decode("utf-8", "replace")


def test_signals_during_the_drain_never_kill_a_worker():
    """A worker that is draining ignores further SIGTERMs. The handlers once were stopped (which
    puts back the default action) before SIG_IGN replaced them, and a forwarded SIGTERM in that
    moment killed the worker (exit by signal: status 1). A burst of signals right after the first
    one aims at that moment, several times."""
    def burst(pid):
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                break

    for _ in range(6):
        rc, text = _serve_then(burst)
        assert rc == 0, text[-3000:]
        assert "killed by signal" not in text, text[-3000:]


def _answers(base):
    try:
        return requests.get(base + "/api/auth/session", timeout=1).status_code == 200
    except requests.RequestException:
        return False


# ---- item 2: streams reset while events fan out ---------------------------------------------


def open_raw_stream(token):
    s = socket.create_connection((HOST, PORT), timeout=10)
    s.sendall(("GET /api/events/users/me/events HTTP/1.1\r\nHost: x\r\nCookie: %s=%s\r\n\r\n"
               % (SESSION_COOKIE, token)).encode())
    data = b""
    while b"retry: 3000\n\n" not in data:
        chunk = s.recv(4096)
        assert chunk, "stream closed before its first frame: %r" % data[:200]
        data += chunk
    assert data.startswith(b"HTTP/1.1 200")
    return s


class Publisher(threading.Thread):
    """Publishes events to the users' channels as fast as Redis takes them (raw RESP)."""

    def __init__(self, user_ids):
        super().__init__(daemon=True)
        u = urlsplit(os.environ.get("COACHD_REDIS_URL", "redis://127.0.0.1:6379/0"))
        self.addr = (u.hostname, u.port or 6379)
        self.user_ids = user_ids
        self.stop = threading.Event()
        self.sent = 0

    def run(self):
        s = socket.create_connection(self.addr, timeout=10)
        n = 0
        try:
            while not self.stop.is_set():
                batch = b""
                # Ids far in the future and increasing, so every stream takes each one as new.
                n += 1
                payload = json.dumps({"id": "99999999999999-%d" % n, "event": "chat-message",
                                      "data": {"body": "x" * 4000}}, separators=(",", ":"))
                for uid in self.user_ids:
                    args = [b"PUBLISH", ("user:%s" % uid).encode(), payload.encode()]
                    batch += b"*3\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
                s.sendall(batch)
                # Read the integer replies so Redis never blocks on us.
                want = len(self.user_ids)
                buf = b""
                while buf.count(b"\r\n") < want:
                    buf += s.recv(65536)
                self.sent += want
        finally:
            s.close()


def test_streams_reset_during_fanout():
    pid = worker_pid()
    users = [sign_up() for _ in range(16)]
    socks = []
    for c, _ in users:
        for _ in range(16):
            socks.append(open_raw_stream(c.session_token))
    pub = Publisher([u["id"] for _, u in users])
    pub.start()
    try:
        time.sleep(0.3)
        random.shuffle(socks)
        for i, s in enumerate(socks):
            # SO_LINGER 0: close() sends a reset, so the server's next write fails at once.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            if i % 16 == 0:
                time.sleep(0.01)
        time.sleep(0.5)
    finally:
        pub.stop.set()
        pub.join(10)
    print("reset %d streams while %d events were published" % (len(socks), pub.sent))
    assert pub.sent > 0
    # The worker survived (a crash would show as a restarted worker with another pid).
    assert worker_pid() == pid
    c, _ = users[0]
    with SSEStream(c, "/api/events/users/me/events") as st:
        assert st.status == 200


# ---- item 9: the access log ------------------------------------------------------------------


def log_text():
    with open(os.environ["COACHD_LOG_FILE"], "rb") as f:
        return f.read().decode("utf-8", "replace")


def test_access_log_redacts_tokens_and_escapes_control_characters():
    # A well-formed invite token (43 characters): unknown, so 404. Only what this test's requests
    # wrote counts (the log holds every test's lines, other invite tests' 404s among them).
    secret = "tok" + uuid.uuid4().hex + "abcdefgh"
    marker = "FORGED" + uuid.uuid4().hex[:8]
    start = os.path.getsize(os.environ["COACHD_LOG_FILE"])
    c = Client()
    c.get("/api/invites/%s" % secret)
    c.get("/api/auth/verify-email?token=%s2" % secret)
    c.get("/api/auth/verify-email?token=%s3&callbackURL=http://localhost/x" % secret)
    c.get("/api/no-such%0D%0A" + marker + "%20GET%20/x%20200")
    # A token-like segment on a path no route takes (a wrong method) is redacted too.
    wrong = "W" + uuid.uuid4().hex + "abcdefghij"
    c.delete("/api/invites/%s" % wrong)
    # A token with a line break and a forged line after it: not a token (400), redacted still.
    c.get("/api/invites/%s%%0D%%0A%s" % (secret, marker))

    def new_text():
        with open(os.environ["COACHD_LOG_FILE"], "rb") as f:
            f.seek(start)
            return f.read().decode("utf-8", "replace")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "/api/invites/[redacted] 400" not in new_text():
        time.sleep(0.1)
    text = new_text()
    assert marker in text
    assert "GET /api/invites/[redacted] 404" in text
    assert "GET /api/invites/[redacted] 400" in text
    assert "DELETE /api/invites/[redacted] 405" in text
    assert secret not in text
    assert wrong not in text
    for line in text.splitlines():
        assert not line.startswith(marker), "forged log line: %r" % line
    assert "\\x0d\\x0a" + marker in text


# ---- item 10: JSON Content-Type and session cookies ------------------------------------------


def test_json_routes_need_json_content_type():
    _, u = sign_up()
    body = json.dumps({"email": u["email"], "password": u["password"]})
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x",
                  None):
        c = Client()
        headers = {"Content-Type": ctype} if ctype else {}
        r = c.post("/api/auth/sign-in/email", data=body, headers=headers)
        if ctype is None:
            assert "Content-Type" not in r.request.headers
        assert_error(r, 415, "UNSUPPORTED_MEDIA_TYPE")
        assert SESSION_COOKIE not in r.cookies
    c = Client()
    r = c.post("/api/auth/sign-in/email", data=body,
               headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200 and c.session_token
    # No body, no Content-Type needed.
    r = c.post("/api/auth/sign-out")
    assert r.status_code == 200


def test_sign_up_conflict_keeps_the_current_session():
    a, ua = sign_up()
    _, ub = sign_up()
    token = a.session_token
    r = a.post("/api/auth/sign-up/email",
               json={"email": ub["email"], "password": "another password 1", "name": "X Y"})
    assert_error(r, 409, "EMAIL_TAKEN")
    assert "set-cookie" not in {k.lower() for k in r.headers}
    assert a.session_token == token
    assert a.get_json("/api/auth/session")["user"]["id"] == ua["id"]
    # A failed sign-in does not touch the cookie either.
    r = a.post("/api/auth/sign-in/email", json={"email": ub["email"], "password": "wrong one 12"})
    assert r.status_code == 401 and "set-cookie" not in {k.lower() for k in r.headers}
    assert a.get_json("/api/auth/session")["user"]["id"] == ua["id"]


# ---- item 13: canonical ids ------------------------------------------------------------------


def test_upper_case_uuid_names_the_same_resource_and_channel():
    org = new_org()
    m = make_mentorship(org)
    upper = m["id"].upper()
    assert upper != m["id"]
    got = org.client("Coach").get_json("/api/mentorships/%s" % upper)["data"]
    assert got["id"] == m["id"]
    with SSEStream(org.client("Coach"), "/api/events/mentorships/%s/events" % upper) as st:
        assert st.status == 200
        time.sleep(0.2)
        publish_event("mentorship:%s" % m["id"], "chat-message", {"id": "c1"})
        assert st.next("chat-message")["data"] == {"id": "c1"}


# ---- item 14: readable 413 -------------------------------------------------------------------


def test_two_mib_json_body_gets_a_readable_413():
    body = b" " * (2 * 1024 * 1024)
    head = ("POST /api/auth/sign-in/email HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            "\r\nContent-Length: %d\r\n\r\n" % len(body))
    # sendall of the whole body succeeds (the server reads and discards it) and the answer is
    # the 413, not a connection reset.
    status, headers, resp = raw_request(head, body)
    assert status == 413
    assert json.loads(resp)["error"]["code"] == "PAYLOAD_TOO_LARGE"
    # The text names the route's limit (1 MiB for a JSON body) in binary units.
    assert json.loads(resp)["error"]["message"] == "Request body too large (limit 1 MiB)", resp
    assert "connection: close" in headers.lower()
    # requests (which sends the whole body first) sees it too.
    r = Client().post("/api/auth/sign-in/email", data=body,
                      headers={"Content-Type": "application/json"})
    assert_error(r, 413, "PAYLOAD_TOO_LARGE")


def test_chunked_trailers_never_become_headers():
    """An X-Organization-Id or Cookie sent as a trailer is ignored (the route sees no session)."""
    _, u = sign_up()
    c = Client()
    c.post_json("/api/auth/sign-in/email", {"email": u["email"], "password": u["password"]})
    body = b"{}"
    raw = ("POST /api/auth/sign-out HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
           "Content-Type: application/json\r\nConnection: close\r\n\r\n%x\r\n" % len(body)).encode()
    raw += body + ("\r\n0\r\nCookie: %s=%s\r\n\r\n" % (SESSION_COOKIE, c.session_token)).encode()
    status, _, _ = raw_request(raw)
    assert status == 401
    # The session was not signed out by the trailer's cookie.
    assert c.get_json("/api/auth/session")["user"]["id"] == u["id"]

