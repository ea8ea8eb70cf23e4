"""TRUSTED_PROXIES: behind a reverse proxy the client is the right-most X-Forwarded-For address
that is not a trusted proxy, for the auth limiter, the per-IP connection cap and the access log;
from any other peer the header is ignored. A second coachd runs here with
TRUSTED_PROXIES=127.0.0.1/32: requests from 127.0.0.1 play the proxy (nginx appends the address it
saw to X-Forwarded-For), requests from 127.0.0.2 a client that reaches coachd directly."""
import json
import os
import socket
import subprocess
import tempfile
import time
import uuid
from urllib.parse import urlsplit

import pytest
import requests

from helpers import (PASSWORD, ROOT, SourceAddressAdapter, assert_error, free_port, psql_value,
                     second_coachd, sign_up, unique_email)

POINTS = 10  # sign-in attempts one client may make a minute (the default AUTH_RATE_LIMIT_POINTS)
CAP = 3  # MAX_CONNECTIONS_PER_IP of the proxied server


def flushed_redis(db):
    """A Redis database of this module's own, empty, so its limiter counts start at zero."""
    url = os.environ["COACHD_REDIS_URL"].rsplit("/", 1)[0] + "/%d" % db
    subprocess.run(["redis-cli", "-u", url, "FLUSHDB"], check=True, capture_output=True)
    return url


class Server:
    def __init__(self, base, log_path):
        self.port = urlsplit(base).port
        self.log_path = log_path

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def request(self, method, path, peer="127.0.0.1", xff=None, headers=None, **kw):
        """From the local address `peer`, with X-Forwarded-For `xff` when given."""
        s = requests.Session()
        s.mount("http://", SourceAddressAdapter(peer))
        h = dict(headers or {})
        if xff is not None:
            h["X-Forwarded-For"] = xff
        with s:
            return s.request(method, self.url(path), headers=h, timeout=15, **kw)

    def sign_in(self, email, password, **kw):
        return self.request("POST", "/api/auth/sign-in/email",
                            json={"email": email, "password": password}, **kw)

    def log_line(self, needle, timeout=5.0):
        """The first line of the server's log holding `needle` (the access line of a request is
        written once its answer has been sent: wait for it)."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if needle in line:
                        return line
            assert time.monotonic() < deadline, "no log line with %r" % needle
            time.sleep(0.05)


def session_ip(r):
    """The client address a sign-in stored on its session."""
    return psql_value("SELECT ip FROM sessions WHERE id = :'id'", id=r.json()["session"]["id"])


def start(db, **env):
    log = tempfile.NamedTemporaryFile(prefix="coachd-proxied-", suffix=".log", delete=False)
    log.close()
    cm = second_coachd(log_path=log.name, REDIS_URL=flushed_redis(db),
                       AUTH_RATE_LIMIT_POINTS=POINTS, AUTH_RATE_LIMIT_DURATION=60, **env)
    return cm, log.name


@pytest.fixture(scope="module")
def proxied():
    cm, log = start(6, TRUSTED_PROXIES="127.0.0.1/32", MAX_CONNECTIONS_PER_IP=CAP)
    try:
        with cm as base:
            yield Server(base, log)
    finally:
        os.unlink(log)


@pytest.fixture(scope="module")
def unconfigured():
    cm, log = start(7, TRUSTED_PROXIES=None)
    try:
        with cm as base:
            yield Server(base, log)
    finally:
        os.unlink(log)


def test_one_forwarded_client_does_not_lock_out_another(proxied):
    _, victim = sign_up()
    _, other = sign_up()
    for _ in range(POINTS):
        r = proxied.sign_in(victim["email"], "wrong password", xff="203.0.113.7")
        assert r.status_code == 401, r.text
    # Another client behind the same proxy signs in...
    r = proxied.sign_in(other["email"], PASSWORD, xff="198.51.100.9")
    assert r.status_code == 200, r.text
    assert session_ip(r) == "198.51.100.9"
    # ...while the first is limited, whatever account it tries next.
    r = proxied.sign_in(unique_email("next"), PASSWORD, xff="203.0.113.7")
    assert_error(r, 429, "RATE_LIMITED")


@pytest.mark.parametrize("case", ["untrusted peer", "TRUSTED_PROXIES unset"])
def test_header_from_other_peers_is_ignored(case, proxied, unconfigured):
    """A client that writes X-Forwarded-For itself, a new address each time, is still limited by
    its own address: the header counts only from a trusted proxy."""
    server, peer = (proxied, "127.0.0.2") if case == "untrusted peer" else (unconfigured,
                                                                            "127.0.0.1")
    _, victim = sign_up()
    for i in range(POINTS):
        r = server.sign_in(victim["email"], "wrong password", peer=peer, xff="192.0.2.%d" % (i + 1))
        assert r.status_code == 401, r.text
    rid = uuid.uuid4().hex
    r = server.sign_in(unique_email("spoof"), PASSWORD, peer=peer, xff="192.0.2.200",
                       headers={"X-Request-Id": rid})
    assert_error(r, 429, "RATE_LIMITED")
    line = server.log_line("id=%s" % rid)
    assert line.rstrip().endswith("client=%s" % peer), line


def test_rightmost_untrusted_address_is_the_client(proxied):
    """The client's own X-Forwarded-For entries stand left of what the proxy appends: they are
    never taken for the client, neither to escape a limit nor to put another client in it."""
    _, victim = sign_up()
    attacker = "192.0.2.66"
    for i in range(POINTS):
        r = proxied.sign_in(victim["email"], "wrong password",
                            xff="10.20.30.%d, %s" % (i + 1, attacker))
        assert r.status_code == 401, r.text
    r = proxied.sign_in(unique_email("spoof"), PASSWORD, xff="198.51.100.33, " + attacker)
    assert_error(r, 429, "RATE_LIMITED")
    # Naming the attacker on the left does not make another client the attacker; a second
    # trusted hop on the right (a proxy in front of the proxy) is skipped.
    _, user = sign_up()
    rid = uuid.uuid4().hex
    r = proxied.sign_in(user["email"], PASSWORD, xff="%s, 198.51.100.77, 127.0.0.1" % attacker,
                        headers={"X-Request-Id": rid})
    assert r.status_code == 200, r.text
    assert session_ip(r) == "198.51.100.77"
    line = proxied.log_line("id=%s" % rid)
    assert "client=198.51.100.77" in line and attacker not in line, line


# ---- the per-IP connection cap, on raw sockets --------------------------------------------------

SIGN_IN_BODY = json.dumps({"email": "nobody@example.com", "password": "wrong password"}).encode()


def read_answer(sock):
    """(status, body) of one HTTP/1.1 answer with a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, "connection closed before an answer: %r" % data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for h in lines[1:]:
        name, _, value = h.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(4096)
        assert chunk, "connection closed inside an answer"
        body += chunk
    return int(lines[0].split()[1]), body[:length]


def connect(server):
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def begin_sign_in(sock, xff):
    """Sends a sign-in head that waits for 100 Continue: once it arrives the server has counted
    the request, and it stays open until the body is sent."""
    sock.sendall(("POST /api/auth/sign-in/email HTTP/1.1\r\nHost: coachd\r\n"
                  "Content-Type: application/json\r\nContent-Length: %d\r\n"
                  "Expect: 100-continue\r\nX-Forwarded-For: %s\r\n\r\n"
                  % (len(SIGN_IN_BODY), xff)).encode())


def get_session(sock, xff):
    sock.sendall(("GET /api/auth/session HTTP/1.1\r\nHost: coachd\r\nX-Forwarded-For: %s\r\n\r\n"
                  % xff).encode())
    return read_answer(sock)


def test_connection_cap_counts_the_forwarded_client(proxied):
    busy, calm = "203.0.113.20", "203.0.113.21"
    held = [connect(proxied) for _ in range(CAP)]
    extra = []
    try:
        for s in held:
            begin_sign_in(s, busy)
            assert read_answer(s) == (100, b"")
        # One more request of the same client, on another proxy connection: refused like a
        # connection over the cap, and that connection closed.
        s = connect(proxied)
        extra.append(s)
        status, body = get_session(s, busy)
        assert status == 503 and json.loads(body)["error"]["code"] == "UNAVAILABLE", body
        assert s.recv(1) == b""
        # The proxy itself is not one client: another client's requests pass, on more
        # connections from 127.0.0.1 than the cap.
        for _ in range(CAP):
            s = connect(proxied)
            extra.append(s)
            assert get_session(s, calm)[0] == 200
        # A request counts while it runs: once one ends the client may open another, and the
        # proxy's kept-alive connection then carries whichever client comes next.
        held[0].sendall(SIGN_IN_BODY)
        assert read_answer(held[0])[0] == 401
        s = connect(proxied)
        extra.append(s)
        assert get_session(s, busy)[0] == 200
        assert get_session(held[0], calm)[0] == 200
        assert get_session(held[0], busy)[0] == 200
    finally:
        for s in held + extra:
            s.close()
    assert "refused a connection of %s (MAX_CONNECTIONS_PER_IP)" % busy in open(
        proxied.log_path).read()


# ---- the access log ---------------------------------------------------------------------------


def test_text_access_log_records_the_client(proxied):
    rid, direct = uuid.uuid4().hex, uuid.uuid4().hex  # 32 hex digits, as nginx's $request_id
    r = proxied.request("GET", "/api/auth/session", xff="1.2.3.4, 203.0.113.99",
                        headers={"X-Request-Id": rid})
    assert r.status_code == 200 and r.headers["X-Request-Id"] == rid
    line = proxied.log_line("id=%s" % rid)
    assert "GET /api/auth/session 200 " in line and line.rstrip().endswith(
        "client=203.0.113.99"), line
    proxied.request("GET", "/api/auth/session", peer="127.0.0.2", xff="203.0.113.98",
                    headers={"X-Request-Id": direct})
    line = proxied.log_line("id=%s" % direct)
    assert line.rstrip().endswith("client=127.0.0.2"), line


def test_json_access_log_records_the_client():
    log = tempfile.NamedTemporaryFile(prefix="coachd-proxied-", suffix=".log", delete=False)
    log.close()
    try:
        with second_coachd(log_path=log.name, LOG_FORMAT="json",
                           TRUSTED_PROXIES="10.0.0.0/8, 127.0.0.1") as base:
            server = Server(base, log.name)
            rid, direct = uuid.uuid4().hex, uuid.uuid4().hex
            server.request("GET", "/api/auth/session", xff="203.0.113.97, 10.1.2.3",
                           headers={"X-Request-Id": rid})
            server.request("GET", "/api/auth/session", peer="127.0.0.2", xff="203.0.113.96",
                           headers={"X-Request-Id": direct})
            records = [json.loads(server.log_line('"requestId":"%s"' % i)) for i in (rid, direct)]
    finally:
        os.unlink(log.name)
    assert records[0]["msg"] == "request" and records[0]["client"] == "203.0.113.97", records
    assert records[1]["client"] == "127.0.0.2", records


@pytest.mark.parametrize("value", ["10.0.0.0/33", "127.0.0.1, nginx.internal", "10.0.0.1/8"])
def test_malformed_list_stops_start_up(value):
    """A list coachd cannot read would silently trust nobody (every client one address again) or
    the wrong network: start-up stops with a message naming the variable."""
    env = dict(os.environ)
    for var in ("DATABASE_URL", "REDIS_URL", "MAIL_DIR", "CLIENT_KEY"):
        if os.environ.get("COACHD_" + var):
            env.setdefault(var, os.environ["COACHD_" + var])
    env.update(PORT=str(free_port()), HOST="127.0.0.1", WORKERS="1", TRUSTED_PROXIES=value)
    binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
    try:
        r = subprocess.run([binary, "serve"], env=env, capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        raise AssertionError("coachd started with TRUSTED_PROXIES=%r" % value) from None
    assert r.returncode == 1, r.stderr
    assert "TRUSTED_PROXIES" in r.stderr, r.stderr


def test_entries_wider_than_private_networks_are_warned_of():
    """An entry wider than any private network takes in clients, who can then choose the
    address coachd limits and logs: start-up says so (and still accepts it). The start is
    stopped right after the configuration by an APP_ENV it refuses, so nothing listens."""
    env = dict(os.environ)
    env.update(TRUSTED_PROXIES="0.0.0.0/0, ::/0, 10.0.0.0/8, fc00::/7, 127.0.0.1",
               APP_ENV="staging", PORT=str(free_port()), HOST="127.0.0.1")
    binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
    r = subprocess.run([binary, "serve"], env=env, capture_output=True, text=True, timeout=10)
    assert r.returncode == 1, r.stderr
    warned = [l for l in r.stderr.splitlines() if "wider than any private network" in l]
    assert len(warned) == 2, r.stderr
    assert "0.0.0.0/0" in warned[0] and "::/0" in warned[1], warned
    assert "TRUSTED_PROXIES" not in r.stderr.replace(warned[0], "").replace(warned[1], ""), r.stderr
