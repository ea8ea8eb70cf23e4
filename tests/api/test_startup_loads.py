"""Start-up: a worker serves only once what its requests depend on is there (docs/operations.md
"Workers"): the storage secret kept in the database (when STORAGE_SECRET is not set) and its
first Redis connection attempt. Connections made meanwhile wait in the listening socket's
backlog, so a request sent right after start gets its real answer, never a 503 for something
still loading. A load that does not finish within 10 s no longer holds the worker back; a
SIGTERM during the wait stops it at once with exit status 0.

Slowness is made with a TCP proxy in front of PostgreSQL or Redis that holds chosen bytes."""
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests

from helpers import (DATABASE_URL, REDIS_URL, ROOT, Client, free_port, second_coachd,
                     unique_email)
from orgs import new_org

# The statement that loads the storage secret (rt/storage.c).
SECRET_QUERY = b"FROM server_secrets WHERE name = 'storage_url_key'"
# docs/operations.md: how long a worker waits for its start-up loads at most.
STARTUP_WAIT = 10


class HoldingProxy:
    """A TCP proxy on a free loopback port to (host, port). Client bytes that contain `marker`
    (every client byte when marker is None) are held until release() (or `hold` seconds after
    the proxy started, when given); `held` counts the chunks that were held."""

    def __init__(self, host, port, marker=None, hold=None):
        self.target = (host, port)
        self.marker = marker
        self.released = threading.Event()
        self.held = 0
        self.closed = False
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", free_port()))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.socks = [self.lsock]
        threading.Thread(target=self._accept, daemon=True).start()
        if hold is not None:
            t = threading.Timer(hold, self.release)
            t.daemon = True
            t.start()

    def release(self):
        self.released.set()

    def url(self, template):
        """template's netloc with the proxy's port (a DATABASE_URL or REDIS_URL)."""
        u = urlsplit(template)
        netloc = u.netloc.rsplit("@", 1)
        hostport = "127.0.0.1:%d" % self.port
        netloc = netloc[0] + "@" + hostport if len(netloc) == 2 else hostport
        return u._replace(netloc=netloc).geturl()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            self.socks += [c, s]
            threading.Thread(target=self._pump, args=(c, s, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c, False), daemon=True).start()

    def _pump(self, src, dst, from_client):
        try:
            while True:
                d = src.recv(65536)
                if not d:
                    break
                if from_client and not self.released.is_set() and (
                        self.marker is None or self.marker in d):
                    self.held += 1
                    while not self.released.wait(0.1):
                        if self.closed:
                            return
                dst.sendall(d)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.closed = True
        self.released.set()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass


@pytest.fixture(scope="module")
def org():
    return new_org(roles=("Coach",))


def pg_proxy(**kw):
    u = urlsplit(DATABASE_URL)
    return HoldingProxy(u.hostname, u.port, **kw)


def storage_env(proxy):
    return dict(DATABASE_URL=proxy.url(DATABASE_URL), STORAGE_SECRET=None,
                STORAGE_DRIVER="local", STORAGE_DIR=tempfile.mkdtemp(prefix="coachd-startup-"))


def coach_on(base, org):
    c = Client(base_url=base, org_id=org.id)
    c.cookies.set("auth.session_token", org.client("Coach").session_token)
    return c


PRESIGN = {"filename": "a.txt", "mimeType": "text/plain", "sizeBytes": 5}


def test_presign_and_upload_right_after_start_wait_for_the_storage_secret(org):
    """The secret's statement is held 3 s: the first requests wait for it instead of getting
    503 "Storage is not configured"."""
    proxy = pg_proxy(marker=SECRET_QUERY, hold=3)
    try:
        with second_coachd(**storage_env(proxy)) as base:
            c = coach_on(base, org)
            r, body = c.call("POST", "/api/files/presign", PRESIGN)
            assert r.status_code == 200, r.text
            assert "/api/files/local?" in body["data"]["presignedUrl"]
            r = c.post("/api/files/upload", files={"file": ("b.txt", b"hello", "text/plain")})
            assert r.status_code == 201, r.text
            assert proxy.held >= 1, "the secret's statement was never held: the test proves nothing"
    finally:
        proxy.close()


def test_a_secret_that_cannot_load_holds_the_worker_back_at_most_the_bound(org):
    """Held for good: the worker serves after the bound and says what is missing; storage then
    answers 503 (truly not configured) while the rest of the API works."""
    proxy = pg_proxy(marker=SECRET_QUERY)
    log = tempfile.NamedTemporaryFile(suffix=".log")
    try:
        t0 = time.monotonic()
        with second_coachd(log_path=log.name, **storage_env(proxy)) as base:
            waited = time.monotonic() - t0
            assert STARTUP_WAIT - 1 <= waited < STARTUP_WAIT + 8, waited
            c = coach_on(base, org)
            r = c.post("/api/files/presign", json=PRESIGN)
            assert r.status_code == 503 and r.json()["error"]["code"] == "UNAVAILABLE", r.text
            assert c.get("/api/auth/session").status_code == 200
            with open(log.name, encoding="utf-8", errors="replace") as f:
                text = f.read()
            assert "serving without the storage secret" in text, text[-2000:]
            proxy.release()  # the retry (every second) loads it: storage works from then on
            deadline = time.monotonic() + 10
            while c.post("/api/files/presign", json=PRESIGN).status_code != 200:
                assert time.monotonic() < deadline, "the secret never loaded after the release"
                time.sleep(0.2)
    finally:
        proxy.close()
        log.close()


def test_sigterm_while_waiting_for_start_up_loads_exits_0_at_once():
    proxy = pg_proxy(marker=SECRET_QUERY)
    env = dict(os.environ, PORT=str(free_port()), HOST="127.0.0.1", WORKERS="1",
               REDIS_URL=os.environ["COACHD_REDIS_URL"])
    env.pop("STORAGE_SECRET", None)
    env.update({k: v for k, v in storage_env(proxy).items() if v is not None})
    binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 20
            while proxy.held == 0:  # the worker is waiting for its secret
                assert time.monotonic() < deadline and proc.poll() is None, "no secret query"
                time.sleep(0.05)
            time.sleep(0.5)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=STARTUP_WAIT)
            log.seek(0)
            text = log.read().decode("utf-8", "replace")
            assert rc == 0, text[-3000:]
            assert time.monotonic() - t0 < 3, text[-3000:]
            assert "listening" not in text, text[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proxy.close()


def test_requests_right_after_start_wait_for_the_first_redis_connection():
    """Redis's handshake (SELECT) is held 2 s: resend-activation, which cannot run without Redis
    (its cooldown lives there), waits for the connection instead of answering 503."""
    u = urlsplit(REDIS_URL)
    proxy = HoldingProxy(u.hostname, u.port, hold=2)
    try:
        # A database of its own makes coachd send SELECT first, which the proxy holds.
        url = proxy.url(REDIS_URL).rsplit("/", 1)[0] + "/11"
        with second_coachd(REDIS_URL=url) as base:
            c = Client(base_url=base)
            r = c.post("/api/auth/resend-activation", json={"email": unique_email("startup")})
            assert r.status_code == 200, r.text
            assert proxy.held >= 1, "Redis was never held: the test proves nothing"
    finally:
        proxy.close()


def test_a_redis_that_refuses_does_not_hold_the_worker_back():
    """Nothing listens at REDIS_URL: the first attempt fails at once, the worker serves at once
    (ready says 503, as Redis is down)."""
    dead = "redis://127.0.0.1:%d/0" % free_port()
    t0 = time.monotonic()
    with second_coachd(REDIS_URL=dead) as base:
        assert time.monotonic() - t0 < STARTUP_WAIT - 2
        assert requests.get(base + "/api/health/ready", timeout=5).status_code == 503
