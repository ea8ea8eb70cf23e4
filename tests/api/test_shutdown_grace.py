"""SIGTERM with SHUTDOWN_GRACE_SECONDS: requests in flight (here a multipart upload whose body is
sent slowly over a raw socket) may finish within the grace and get their answer, and the exit
status is 0; what is still running when the grace ends is cut cleanly (the upload's temporary
file removed) and the exit status is 1. Idle keep-alive connections close at once."""
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from urllib.parse import urlsplit

import pytest
import requests

from helpers import ROOT, free_port, psql_value, wait_until
from orgs import new_org

SANITIZER = r"ERROR: (Address|Leak|Thread)Sanitizer|runtime error:"
BOUNDARY = "graceBoundary"
HEAD = ('--%s\r\nContent-Disposition: form-data; name="file"; filename="slow.mp4"\r\n'
        'Content-Type: video/mp4\r\n\r\n' % BOUNDARY).encode()
TAIL = ("\r\n--%s--\r\n" % BOUNDARY).encode()
CHUNK = 64 * 1024


class Server:
    """A coachd of its own (WORKERS=1, a free port, STORAGE_DIR in a temporary folder)."""

    def __init__(self, **extra):
        self.storage = tempfile.mkdtemp(prefix="coachd-grace-")
        env = dict(os.environ)
        for var in ("DATABASE_URL", "REDIS_URL", "MAIL_DIR", "CLIENT_KEY"):
            if os.environ.get("COACHD_" + var):
                env.setdefault(var, os.environ["COACHD_" + var])
        self.port = free_port()
        env.update(PORT=str(self.port), HOST="127.0.0.1", WORKERS="1", STORAGE_DIR=self.storage,
                   STORAGE_DRIVER="local", AUTH_RATE_LIMIT_POINTS="0")
        env.update({k: str(v) for k, v in extra.items()})
        binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL,
                                     stderr=self.log)
        self.base = "http://127.0.0.1:%d" % self.port
        deadline = time.monotonic() + 20
        while True:
            try:
                requests.get(self.base + "/api/auth/session", timeout=1)
                break
            except (requests.ConnectionError, requests.Timeout):
                assert time.monotonic() < deadline and self.proc.poll() is None, self.text()
                time.sleep(0.1)

    def text(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def tmp_entries(self):
        d = os.path.join(self.storage, ".tmp")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def org():
    return new_org(roles=("Coach",))


def start_upload(srv, org, total):
    """Sends an upload's head and first bytes (total bytes of file content announced) as the
    organization's Coach (the servers share the database); returns the socket once the temporary
    file exists."""
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(("POST /api/files/upload HTTP/1.1\r\nHost: x\r\nCookie: auth.session_token=%s\r\n"
               "X-Organization-Id: %s\r\nContent-Type: multipart/form-data; boundary=%s\r\n"
               "Content-Length: %d\r\n\r\n"
               % (org.client("Coach").session_token, org.id, BOUNDARY,
                  len(HEAD) + total + len(TAIL))).encode() + HEAD)
    s.sendall(b"\1" * CHUNK * 8)
    try:
        wait_until(lambda: srv.tmp_entries() != [], what="upload in progress")
    except AssertionError:
        raise AssertionError("no upload in progress: %r\n%s"
                             % (read_answer(s, 1)[:500], srv.text()[-2000:])) from None
    return s


def read_answer(s, timeout):
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
            if b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        if len(body) >= int(line.split(b":")[1]):
                            return out
    except (ConnectionResetError, socket.timeout):
        pass
    return out


def test_upload_finishing_within_the_grace_is_answered_and_exit_is_0(org):
    srv = Server(SHUTDOWN_GRACE_SECONDS=25)
    try:
        # An idle keep-alive connection, closed at once by the drain.
        idle = socket.create_connection(("127.0.0.1", srv.port))
        idle.sendall(b"GET /api/auth/session HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(idle, 5).startswith(b"HTTP/1.1 200")
        chunks = 24  # one every 0.5 s: the body ends about 12 s after SIGTERM (the old cut was 9 s)
        s = start_upload(srv, org, total=CHUNK * (8 + chunks))
        srv.proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        idle.settimeout(3)
        assert idle.recv(1) == b"", "the idle connection stayed open"
        idle_closed = time.monotonic() - t0
        for _ in range(chunks):
            time.sleep(0.5)
            s.sendall(b"\2" * CHUNK)
        s.sendall(TAIL)
        answer = read_answer(s, 10)
        assert answer.startswith(b"HTTP/1.1 201"), (answer[:500], srv.text()[-3000:])
        assert b"Connection: close" in answer
        assert srv.proc.wait(timeout=15) == 0, srv.text()[-3000:]
        assert idle_closed < 2
        assert srv.tmp_entries() == []
        assert "drain incomplete" not in srv.text()
        assert not re.search(SANITIZER, srv.text()), srv.text()[-5000:]
    finally:
        srv.close()


def test_upload_past_the_grace_is_cut_cleanly_and_exit_is_1(org):
    srv = Server(SHUTDOWN_GRACE_SECONDS=2)
    try:
        s = start_upload(srv, org, total=CHUNK * 1000)
        s.settimeout(5)
        assert srv.tmp_entries() != []
        srv.proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        cut = False
        while time.monotonic() - t0 < 20:  # keeps sending, slowly, never finishing
            try:
                s.sendall(b"\2" * 1024)
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            time.sleep(0.2)
        took = time.monotonic() - t0
        assert cut, "the upload was never cut"
        assert 1.5 < took < 6, took
        rc = srv.proc.wait(timeout=15)
        text = srv.text()
        assert rc == 1, "exit status %s, expected 1:\n%s" % (rc, text[-3000:])
        assert "drain incomplete: 1 requests cut" in text, text[-3000:]
        assert srv.tmp_entries() == [], "temporary file left: %s" % srv.tmp_entries()
        assert not re.search(SANITIZER, text), text[-5000:]
    finally:
        srv.close()


def test_download_in_flight_finishes_within_the_grace(org):
    """A file download is a request in flight like an upload: SIGTERM lets it finish (all of its
    bytes, exit status 0) rather than closing it with the event streams. It was cut at once, the
    client got a short body, and the exit status still said the drain was complete."""
    srv = Server(SHUTDOWN_GRACE_SECONDS=25)
    try:
        coach = org.client("Coach")
        headers = {"Cookie": "auth.session_token=%s" % coach.session_token,
                   "X-Organization-Id": org.id}
        data = os.urandom(8 * 1024 * 1024)
        body = b"".join([HEAD, data, TAIL])
        r = requests.post(srv.base + "/api/files/upload", data=body, timeout=30,
                          headers=dict(headers, **{"Content-Type": "multipart/form-data; "
                                                   "boundary=%s" % BOUNDARY}))
        assert r.status_code == 201, r.text
        r = requests.get(srv.base + "/api/files/%s" % r.json()["data"]["fileId"], headers=headers,
                         timeout=10)
        assert r.status_code == 200, r.text
        url = urlsplit(r.json()["data"]["presignedUrl"])
        # A reader with a small receive buffer that reads nothing until after the signal: most
        # of the file is still in coachd's hands when the drain begins.
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        s.connect(("127.0.0.1", srv.port))
        s.sendall(("GET %s?%s HTTP/1.1\r\nHost: x\r\n\r\n" % (url.path, url.query)).encode())
        s.settimeout(10)
        got = s.recv(4096)
        assert got.startswith(b"HTTP/1.1 200"), got[:300]
        time.sleep(0.5)
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(1)
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
        s.close()
        head, _, content = got.partition(b"\r\n\r\n")
        assert len(content) == len(data) and content == data, (len(content), len(data))
        assert srv.proc.wait(timeout=15) == 0, srv.text()[-3000:]
        assert "drain incomplete" not in srv.text()
        assert not re.search(SANITIZER, srv.text()), srv.text()[-5000:]
    finally:
        srv.close()


def test_event_stream_opened_during_the_drain_closes_at_once(org):
    """An event stream whose opening was under way at SIGTERM (here its database read waits on
    a lock) opens during the drain: it is closed at once like the streams open at the signal,
    and the drain ends without waiting for the grace. It stayed open until the grace was over,
    was then counted as cut, and the exit status was 1."""
    srv = Server(SHUTDOWN_GRACE_SECONDS=20)
    lock = None
    try:
        coach = org.client("Coach")
        lock = subprocess.Popen(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", os.environ["COACHD_DATABASE_URL"],
             "-c", "BEGIN; LOCK TABLE organization_memberships IN ACCESS EXCLUSIVE MODE; "
                   "SELECT pg_sleep(2); COMMIT;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(lambda: psql_value("SELECT count(*) FROM pg_locks l JOIN pg_class c ON "
                                      "c.oid = l.relation WHERE c.relname = "
                                      "'organization_memberships' AND l.mode = "
                                      "'AccessExclusiveLock' AND l.granted") == "1",
                   what="the lock")
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(("GET /api/events/users/me/events HTTP/1.1\r\nHost: x\r\n"
                   "Cookie: auth.session_token=%s\r\n\r\n" % coach.session_token).encode())
        time.sleep(0.3)
        srv.proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        assert lock.wait(timeout=10) == 0, lock.stderr.read()
        s.settimeout(8)
        got = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
        except socket.timeout:
            raise AssertionError("the stream opened in the drain stayed open: %r" % got[:300])
        assert got.startswith(b"HTTP/1.1 200"), got[:300]
        assert srv.proc.wait(timeout=15) == 0, srv.text()[-3000:]
        assert time.monotonic() - t0 < 10
        assert not re.search(SANITIZER, srv.text()), srv.text()[-5000:]
    finally:
        if lock and lock.poll() is None:
            lock.kill()
            lock.wait()
        srv.close()
