#!/usr/bin/env python3
"""Streams that end badly: an abuse client for every streaming path of coachd.

It starts a coachd of its own (COACHD_BIN, WORKERS=1, REQUEST_TIMEOUT_SECONDS=2,
STREAM_WRITE_TIMEOUT_SECONDS=2, a STORAGE_DIR of its own), so it owns the worker process and the
temporary folder, builds a small world through the API (an organization, a coach and a teacher in
an active mentorship, a registered 16 MiB file, a long event history on both stream channels) and
then runs a table of endings on each path:

  multipart upload (Content-Length), chunked upload, presigned PUT (local driver), presigned GET
  (download), the user stream and the mentorship stream (with and without Last-Event-ID), and a
  calendar feed of about 3 MiB (rendered on the thread pool)

  x  FIN (close), half-close (shutdown SHUT_WR, then read to the end) and RST (SO_LINGER 0) at
     named byte offsets: start, inside the request line, inside the headers, the first body byte,
     the part headers, the file data, the closing multipart boundary, the last byte but one,
     after the last byte, and while the answer is being read
  +  malformed chunk sizes after a chunk of 0.5 to 5 MiB, bodies over the limit, stalls past each
     deadline, receivers that never read (SO_RCVBUF 4 KiB) and a burst of replays that are not
     read (their memory together within REPLAY_MEMORY_MAX).

After each case it asserts, within a few seconds (SETTLE):

  - the worker is the same process: same pid, coachd_worker_restarts_total 0 in /metrics, no
    "worker ... killed" line from the supervisor;
  - no sanitizer report in coachd's stderr ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
    "runtime error:");
  - the worker's open descriptors are back at the baseline: no accepted connection open, no file
    under STORAGE_DIR open, the same count of every other kind (pipes, event fds, files), outgoing
    sockets (PostgreSQL, Redis) aside, as the pool may grow;
  - STORAGE_DIR/.tmp holds what it held before;
  - resident memory (VmRSS) is within 24 MiB of the high-water mark of the clean cases before
    (normal build only; see rss_tolerance()).

A failed case is reported with what it left, and the baseline is taken again, so each leak is
charged to the case that made it; after a crash the harness goes on against the replacement.

Positive controls (a complete upload answers 201, a download returns the file, a replay returns
the history) make sure the requests are well-formed, so a case cannot pass because everything was
refused early.

Usage: endings.py [--table ci|full] [--match SUBSTR] [--repeat N] [--list] [--json OUT]
[--workdir DIR]. Needs DATABASE_URL and
REDIS_URL (or the COACHD_* variables of tests/api/helpers.py) of a migrated database, and
COACHD_BIN (default build/coachd). Prints one line per case and "N passed, N failed" last.
tests/api/test_endings.py drives the ci table inside the API suite; scripts/endings runs it all.
"""
import argparse
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
API = os.path.join(ROOT, "tests", "api")
if API not in sys.path:
    sys.path.insert(0, API)

KIB = 1024
MIB = 1024 * 1024
LINGER = 10  # core/http.c's LINGER_TIMEOUT_MS: how long a refused client is read after the answer
DEADLINE = 2  # REQUEST_TIMEOUT_SECONDS and STREAM_WRITE_TIMEOUT_SECONDS of the coachd started here
# A case's teardown must be done within this: a deadline (2 s), the 1-second ticks that check it,
# and the answer's way out, with room for the ASan build on a busy machine.
SETTLE = float(os.environ.get("ENDINGS_SETTLE", "8"))
DOWNLOAD_SIZE = 16 * MIB  # more than the send buffer (tcp_wmem max 4 MiB) plus the receive window
HISTORY_EVENTS = 1000     # entries on each channel's history (EVENT_HISTORY_MAX's default)
HISTORY_PAD = 8 * KIB     # bytes of padding per event: an 8 MiB history
BOUNDARY = "endingsB0undary"
REPLAY_CAP = 8 * MIB      # REPLAY_MEMORY_MAX of the coachd started here
REPLAY_SLACK = 16 * MIB   # the rest of a burst: Redis replies being parsed, buffers, the heap
FEED_SESSIONS = 2000      # sessions in the coach's calendar feed: about 3.5 MiB of iCalendar
FEED_CAP = 8 * MIB        # CALENDAR_FEED_MEMORY_MAX of the coachd started here

# ---- the coachd under test ------------------------------------------------------------------


def free_port():
    """As tests/api/helpers.py's (below the ephemeral range); here so that helpers is imported
    only once COACHD_URL is known."""
    import random
    for _ in range(200):
        port = random.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port below the ephemeral range")


def proc_children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open("/proc/%s/stat" % d) as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                            out.append(int(d))
                except (OSError, IndexError, ValueError):
                    pass
        return out


class Coachd:
    """COACHD_BIN serve with WORKERS=1 and short deadlines; stderr to `log_path`."""

    def __init__(self, workdir, binary=None, **env):
        self.workdir = workdir
        self.storage = os.path.join(workdir, "storage")
        os.makedirs(self.storage, exist_ok=True)
        self.log_path = os.path.join(workdir, "coachd.log")
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.token = "endings-" + uuid.uuid4().hex
        self.binary = binary or os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
        full = dict(os.environ)
        for var in ("DATABASE_URL", "REDIS_URL", "CLIENT_KEY"):
            if os.environ.get("COACHD_" + var):
                full.setdefault(var, os.environ["COACHD_" + var])
        full.setdefault("CLIENT_KEY", "endings-client-key")
        full.setdefault("APP_ENV", "development")
        full.update(
            PORT=str(self.port), HOST="127.0.0.1", WORKERS="1", STORAGE_DRIVER="local",
            STORAGE_DIR=self.storage, PUBLIC_URL=self.base,
            REQUEST_TIMEOUT_SECONDS=str(DEADLINE), STREAM_WRITE_TIMEOUT_SECONDS=str(DEADLINE),
            METRICS_TOKEN=self.token, MAX_CONNECTIONS_PER_IP="0", RATE_LIMITER_ENABLED="false",
            AUTH_RATE_LIMIT_POINTS="0", LOG_LEVEL="warn",
            # The janitor's directory walks would show up as open storage files; what is left
            # in .tmp is this harness's to find.
            STORAGE_JANITOR_INTERVAL_SECONDS="86400",
            # What all replays of the worker may hold unsent, together: the burst of unread
            # replays below must stay within it (its default, 64 MiB, is 8 whole histories).
            REPLAY_MEMORY_MAX=str(REPLAY_CAP),
            # What the worker's calendar feeds may hold, rendering and being sent: the burst of
            # unread feeds below must stay within it.
            CALENDAR_FEED_MEMORY_MAX=str(FEED_CAP),
            # Large blocks always from mmap and given back at free: VmRSS then follows what the
            # worker holds, not what glibc keeps cached (no effect on the ASan build's allocator).
            MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
        full.pop("MAIL_DIR", None)
        full.update({k: str(v) for k, v in env.items()})
        self.env = full
        self.proc = None
        self.log = None

    def start(self):
        import requests
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([self.binary, "serve"], env=self.env, stdout=self.log,
                                     stderr=self.log)
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(self.base + "/api/auth/session", timeout=2)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise AssertionError("coachd did not start (exit status %s):\n%s"
                                         % (self.proc.poll(), self.log_tail()))
                time.sleep(0.1)
        return self

    def stop(self, timeout=15):
        """SIGTERM; returns the exit status (0: drained; a leak report at exit makes it 1)."""
        if not self.proc:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        self.proc = None
        return rc

    def log_text(self, start=0):
        with open(self.log_path, "rb") as f:
            f.seek(start)
            return f.read().decode("utf-8", "replace")

    def log_size(self):
        return os.path.getsize(self.log_path)

    def log_tail(self, n=4000):
        return self.log_text()[-n:]

    def worker(self):
        """The worker's pid (WORKERS=1: the supervisor's only child), or None meanwhile."""
        kids = proc_children(self.proc.pid) if self.proc else []
        return kids[0] if len(kids) == 1 else None

    def metrics(self):
        import requests
        r = requests.get(self.base + "/metrics", timeout=10,
                         headers={"Authorization": "Bearer " + self.token, "Connection": "close"})
        r.raise_for_status()
        out = {}
        for line in r.text.splitlines():
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
            if m and not m.group(2):
                out[m.group(1)] = float(m.group(3))
        return out

    def asan(self):
        """True when the worker runs with AddressSanitizer (its allocator keeps freed memory in a
        quarantine, so VmRSS says nothing about what is still held)."""
        pid = self.worker()
        try:
            with open("/proc/%d/maps" % pid) as f:
                maps = f.read()
        except (OSError, TypeError):
            return False
        return "libasan" in maps or "libclang_rt.asan" in maps


SANITIZER = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer|ThreadSanitizer)|runtime error:|"
                       r"worker \d+ (killed by signal|exited \(status)")


# ---- what the worker holds ------------------------------------------------------------------


def tcp_table(pid):
    """inode -> (local port, state) of the worker's network namespace."""
    out = {}
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as f:
                next(f)
                for line in f:
                    p = line.split()
                    out[p[9]] = (int(p[1].rsplit(":", 1)[1], 16), p[3])
        except OSError:
            pass
    return out


class Snapshot:
    def __init__(self, srv, pid):
        self.pid = pid
        self.clients = []   # accepted connections (fd targets)
        self.storage = []   # files under STORAGE_DIR
        self.outgoing = 0   # other TCP sockets (PostgreSQL, Redis)
        self.other = {}     # kind -> count (pipes, anon inodes, unix sockets, files)
        self.rss = 0
        fd_dir = "/proc/%d/fd" % pid
        links = []
        for fd in os.listdir(fd_dir):
            try:
                links.append((int(fd), os.readlink(os.path.join(fd_dir, fd))))
            except OSError:
                pass
        tcp = tcp_table(pid) if any(t.startswith("socket:") for _, t in links) else {}
        for fd, t in links:
            if t.startswith("socket:["):
                ino = t[8:-1]
                if ino in tcp:
                    port, state = tcp[ino]
                    if port == srv.port and state != "0A":
                        self.clients.append(fd)
                    elif port == srv.port:
                        self.other["listen"] = self.other.get("listen", 0) + 1
                    else:
                        self.outgoing += 1
                    continue
                kind = "socket"
            elif t.startswith(srv.storage):
                self.storage.append(t)
                continue
            elif t.startswith("/"):
                kind = "file"
            else:
                kind = re.sub(r"[:\[].*", "", t)
            self.other[kind] = self.other.get(kind, 0) + 1
        self.nfds = len(links)
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    self.rss = int(line.split()[1]) * KIB
        tmp = os.path.join(srv.storage, ".tmp")
        self.tmp = sorted(os.listdir(tmp)) if os.path.isdir(tmp) else []

    def describe(self):
        return ("fds %d (connections %d, storage files %d, outgoing %d, other %s), .tmp %d, "
                "RSS %.1f MiB" % (self.nfds, len(self.clients), len(self.storage), self.outgoing,
                                  dict(sorted(self.other.items())), len(self.tmp),
                                  self.rss / MIB))


# ---- the world --------------------------------------------------------------------------------

PUBLISH_MANY = (
    "local pad = string.rep('x', tonumber(ARGV[3])) "
    "local last = '' "
    "for i = 1, tonumber(ARGV[2]) do "
    "  local tail = '\"event\":\"endings\",\"data\":{\"i\":' .. i .. ',\"pad\":\"' .. pad .. '\"}}' "
    "  last = redis.call('XADD', KEYS[1], '*', 'm', tail) "
    "  if ARGV[4] == '1' then redis.call('PUBLISH', ARGV[1], '{\"id\":\"' .. last .. '\",' .. tail) end "
    "end "
    "redis.call('PEXPIRE', KEYS[1], 86400000) "
    "return last")


def publish_many(channel, n, pad, live=True, first_id=False):
    """n events of `pad` bytes into the channel's history (and live when `live`); returns the
    first event's id when first_id, else the last one's."""
    import helpers
    last = helpers.redis_cli("EVAL", PUBLISH_MANY, 1, "events:" + channel, channel, n, pad,
                             "1" if live else "0")
    if first_id:
        out = helpers.redis_cli("XRANGE", "events:" + channel, "-", "+", "COUNT", 1).split()
        return out[0]
    return last


class World:
    """An organization with a coach and a teacher in an active mentorship (made through the test
    server of tests/api/helpers.py, COACHD_URL, which shares the database), a 16 MiB file on the
    harness's coachd, and HISTORY_EVENTS events on the coach's user channel and the mentorship's
    channel."""

    def __init__(self, srv):
        from orgs import new_org
        from ment_fixtures import make_mentorship
        import helpers
        import requests
        self.srv = srv
        org = new_org(roles=("Manager", "Coach", "Teacher"))
        self.org_id = org.id
        self.mentorship = make_mentorship(org)["id"]
        coach = org.client("Coach")
        self.user_id = org.uid("Coach")
        self.cookie = "auth.session_token=%s" % coach.session_token
        self.auth = "Cookie: %s\r\nX-Organization-Id: %s\r\n" % (self.cookie, self.org_id)
        self.http = requests.Session()
        # No connection kept: the worker must hold none between cases.
        self.http.headers.update({"Cookie": self.cookie, "X-Organization-Id": self.org_id,
                                  "Connection": "close"})
        data = os.urandom(DOWNLOAD_SIZE)
        p = self.presign("big.txt", len(data))
        r = requests.put(p["presignedUrl"], data=data, timeout=60,
                         headers={"Content-Type": "text/plain", "Connection": "close"})
        assert r.status_code in (200, 204), r.text
        r = self.http.post(srv.base + "/api/files/register", timeout=30, json={
            "storageKey": p["storageKey"], "filename": "big.txt", "mimeType": "text/plain",
            "sizeBytes": len(data)})
        assert r.status_code == 201, r.text
        self.file_id = r.json()["data"]["fileId"]
        self.download_size = len(data)
        # Histories to replay: the first id of each (a Last-Event-ID at the start of the history).
        self.user_chan = "user:%s" % self.user_id
        self.ment_chan = "mentorship:%s" % self.mentorship
        self.user_first = publish_many(self.user_chan, HISTORY_EVENTS, HISTORY_PAD, live=False,
                                       first_id=True)
        self.ment_first = publish_many(self.ment_chan, HISTORY_EVENTS, HISTORY_PAD, live=False,
                                       first_id=True)
        self.history_bytes = HISTORY_EVENTS * HISTORY_PAD
        # A calendar feed of FEED_SESSIONS sessions (about 3 MiB), rendered on the thread pool.
        helpers.psql("""
            INSERT INTO mentorship_sessions (id, mentorship_id, organization_id, scheduled_at,
                duration_minutes, ends_at, busy, notes)
            SELECT gen_random_uuid(), m.id, m.organization_id, t, 45, t + interval '45 minutes',
                   tstzrange(t, t + interval '60 minutes'), repeat('endings; notes, ', 60)
            FROM mentorships m,
                 LATERAL (SELECT now() + make_interval(hours => 2 * g) AS t
                          FROM generate_series(1, :n) g) s
            WHERE m.id = :'m'""", n=FEED_SESSIONS, m=self.mentorship)
        r = self.http.post(srv.base + "/api/users/me/calendar-feed", timeout=30)
        assert r.status_code == 201, r.text
        self.feed_path = path_of(r.json()["data"]["url"])

    def presign(self, filename, size, mime="text/plain"):
        r = self.http.post(self.srv.base + "/api/files/presign", timeout=30, json={
            "filename": filename, "mimeType": mime, "sizeBytes": size})
        assert r.status_code == 200, r.text
        return r.json()["data"]

    def download_url(self):
        r = self.http.get(self.srv.base + "/api/files/%s" % self.file_id, timeout=30)
        assert r.status_code == 200, r.text
        return r.json()["data"]["presignedUrl"]


def path_of(url):
    import urllib.parse
    u = urllib.parse.urlsplit(url)
    return u.path + ("?" + u.query if u.query else "")


def hend(data):
    """Where the request's body starts."""
    return data.index(b"\r\n\r\n") + 4


# ---- requests ---------------------------------------------------------------------------------


def multipart(size, mime="text/plain", filename="e.txt"):
    """(body, marks): a multipart body with one file part of `size` bytes and a prefix field;
    marks name offsets inside it."""
    part = ('--%s\r\nContent-Disposition: form-data; name="file"; filename="%s"\r\n'
            'Content-Type: %s\r\n\r\n' % (BOUNDARY, filename, mime)).encode()
    data = (b"endings-" * (size // 8 + 1))[:size]
    tail_field = ('\r\n--%s\r\nContent-Disposition: form-data; name="prefix"\r\n\r\nendings'
                  % BOUNDARY).encode()
    closing = ("\r\n--%s--\r\n" % BOUNDARY).encode()
    body = part + data + tail_field + closing
    marks = {
        "part-headers": 20,
        "file-data": len(part) + min(1000, size // 2),
        "mid-file": len(part) + size // 2,
        "file-end": len(part) + size,
        "boundary": len(part) + size + 2,          # the "--boundary" after the file
        "closing-boundary": len(body) - len(closing) + 2,
        "closing-boundary+4": len(body) - len(closing) + 6,
    }
    return body, marks


def upload_head(w, length=None, chunked=False, ctype=None, method="POST", path="/api/files/upload",
                extra=""):
    ctype = ctype or "multipart/form-data; boundary=%s" % BOUNDARY
    h = "%s %s HTTP/1.1\r\nHost: endings\r\n%sContent-Type: %s\r\nConnection: close\r\n%s" % (
        method, path, w.auth if path.startswith("/api/files/upload") else "", ctype, extra)
    if chunked:
        h += "Transfer-Encoding: chunked\r\n"
    elif length is not None:
        h += "Content-Length: %d\r\n" % length
    return (h + "\r\n").encode()


def get_head(w, path, last_event_id=None, auth=True):
    h = "GET %s HTTP/1.1\r\nHost: endings\r\n%sAccept: text/event-stream\r\nConnection: close\r\n" % (
        path, w.auth if auth else "")
    if last_event_id:
        h += "Last-Event-ID: %s\r\n" % last_event_id
    return (h + "\r\n").encode()


def chunk(data):
    return b"%x\r\n" % len(data) + data + b"\r\n"


# ---- one connection ---------------------------------------------------------------------------


class Conn:
    def __init__(self, srv, rcvbuf=None, timeout=10):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(timeout)
        self.s.connect(("127.0.0.1", srv.port))
        self.got = b""
        self.closed_by_server = False

    def send(self, data, piece=256 * KIB):
        """Sends data; False when the server closed meanwhile (an early answer, a reset)."""
        try:
            for i in range(0, len(data), piece):
                self.s.sendall(data[i:i + piece])
            return True
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            self.closed_by_server = True
            return False

    def read(self, n=None, until=None, timeout=10):
        """Reads until n bytes, the marker `until`, or EOF/timeout; returns what was read."""
        self.s.settimeout(0.5)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if n is not None and len(self.got) >= n:
                break
            if until is not None and until in self.got:
                break
            try:
                b = self.s.recv(256 * KIB)
            except socket.timeout:
                continue
            except (ConnectionResetError, OSError):
                break
            if not b:
                break
            self.got += b
        return self.got

    def read_slowly(self, pause, until=None):
        """Reads 64 KiB at a time with a pause after each, until EOF, an error or the answer
        ending with `until`."""
        self.s.settimeout(10)
        while until is None or not self.got.endswith(until):
            try:
                b = self.s.recv(64 * KIB)
            except OSError:
                break
            if not b:
                break
            self.got += b
            time.sleep(pause)
        return self.got

    def status(self):
        m = re.match(rb"HTTP/1\.1 (\d{3})", self.got)
        return int(m.group(1)) if m else None

    def end(self, how):
        """fin: close() (FIN; later writes of the server meet a reset); half: shutdown(SHUT_WR),
        read to the server's end, close; rst: SO_LINGER 0, close (RST at once); hold: send no
        more, but read, and close once the server has closed (a client that stalls but hears the
        answer); deaf: keep the socket open and never read (the server must end it alone). hold
        and deaf return the socket, which the harness closes after its checks."""
        if how == "deaf":
            self.wait_answer()
            return self.s
        if how == "hold":
            threading.Thread(target=self._close_on_eof, daemon=True).start()
            return self.s
        try:
            if how == "rst":
                self.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif how == "half":
                self.s.shutdown(socket.SHUT_WR)
                self.read(timeout=SETTLE)
        except OSError:
            pass
        self.s.close()
        return None

    def wait_answer(self, timeout=5):
        """Waits, without reading, until the server's answer has begun to arrive: the worker
        has taken the connection, so what the checks see is its doing."""
        import fcntl
        import termios
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                n = struct.unpack("i", fcntl.ioctl(self.s.fileno(), termios.FIONREAD, b"\0" * 4))[0]
            except OSError:
                return
            if n > 0:
                return
            time.sleep(0.02)

    def _close_on_eof(self):
        self.s.settimeout(1)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                b = self.s.recv(64 * KIB)
            except socket.timeout:
                continue
            except OSError:
                break
            if not b:
                break
            self.got += b
        try:
            self.s.close()
        except OSError:
            pass


def send_then_end(srv, data, offset, how, read_first=None, rcvbuf=None):
    """Sends data[:offset] and ends the connection as `how`; read_first: bytes (or a marker) of
    the answer to read before ending."""
    c = Conn(srv, rcvbuf=rcvbuf)
    c.send(data[:offset])
    if isinstance(read_first, int):
        c.read(n=read_first)
    elif read_first is not None:
        c.read(until=read_first)
    return [c.end(how)]


# ---- the table -----------------------------------------------------------------------------


class Case:
    def __init__(self, name, run, ci=False, settle=SETTLE):
        self.name, self.run, self.ci, self.settle = name, run, ci, settle


ENDS = ("fin", "half", "rst")


def offset_cases(prefix, build, marks, ci_marks, stall_marks=(), ci_stall=()):
    """One case per (offset, ending). build(w) -> request bytes; marks: name -> offset (or a
    function of the request length)."""
    out = []
    for mark in marks:
        stalls = ("hold", "deaf") if mark in stall_marks else ()
        for how in ENDS + stalls:
            def run(h, mark=mark, how=how):
                data = build(h.w)
                off = marks[mark](data) if callable(marks[mark]) else marks[mark]
                return send_then_end(h.srv, data, off, how)
            label = {"hold": "stall", "deaf": "stall deaf"}.get(how, how)
            name = "%s %s @%s" % (prefix, label, mark)
            ci = (mark in ci_marks and how in ENDS) or (how == "hold" and mark in ci_stall)
            # The idle connection's deadline is IDLE_TIMEOUT (60 s, not configurable); a deaf
            # client also waits out the lingering close (10 s) after the 408.
            settle = SETTLE
            if mark == "start":
                settle = 70
            elif how == "deaf":
                settle = DEADLINE + LINGER + SETTLE
            out.append(Case(name, run, ci=ci, settle=settle))
    return out


def get_answer_cases(prefix, build, reads, ci_read):
    """The endings of a GET whose answer is large: the request cut at its marks (the CI table
    takes the whole request), and the client ending (fin, half, rst) after each of `reads`
    ((bytes or a marker, label)) of the answer (the CI table takes ci_read's fin and rst)."""
    out = offset_cases(prefix, build, {"start": 0, "request-line": 7,
                                       "headers": lambda d: len(d) // 2,
                                       "last-but-one": lambda d: len(d) - 1,
                                       "all": lambda d: len(d)},
                       ci_marks=("all",), stall_marks=("headers",))
    for read, label in reads:
        for how in ENDS:
            def run(h, read=read, how=how):
                return send_then_end(h.srv, build(h.w), None, how, read_first=read)
            out.append(Case("%s %s after %s of the answer" % (prefix, how, label), run,
                            ci=(label == ci_read and how in ("fin", "rst"))))
    return out


def header_marks(head_len):
    return {"start": 0, "request-line": 7, "headers": head_len // 2, "headers-end": head_len - 2}


def build_table():
    cases = []

    # -- multipart upload with Content-Length: ~300 KB, as in the report ----------------------
    body, bm = multipart(300 * KIB)

    def mp_req(w, body=body):
        return upload_head(w, len(body)) + body

    def mp_marks():
        marks = {}

        def at(name, off):
            marks[name] = lambda data, off=off: (len(data) - len(body)) + off if off >= 0 else len(data) + off
        marks["start"] = 0
        marks["request-line"] = 7
        marks["headers"] = lambda data: (len(data) - len(body)) // 2
        marks["body-start"] = lambda data: len(data) - len(body)
        for k, v in bm.items():
            at(k, v)
        marks["last-but-one"] = lambda data: len(data) - 1
        marks["all"] = lambda data: len(data)
        return marks

    cases += offset_cases(
        "upload-cl", mp_req, mp_marks(),
        ci_marks=("headers", "mid-file", "closing-boundary", "all"),
        stall_marks=("start", "headers", "body-start", "mid-file", "closing-boundary+4",
                     "last-but-one"),
        ci_stall=("mid-file",))

    def answer_then(how):
        def run(h):
            return send_then_end(h.srv, mp_req(h.w), None, how, read_first=1)
        return run
    for how in ENDS:
        cases.append(Case("upload-cl %s while the answer is read" % how, answer_then(how)))

    def upload_ok(h):
        c = Conn(h.srv)
        c.send(mp_req(h.w))
        c.read(until=b"}")
        assert c.status() == 201, "complete upload: %r" % c.got[:300]
        c.end("fin")
    cases.append(Case("upload-cl complete (control: 201)", upload_ok, ci=True))

    def upload_fin_burst(h):
        """The report's shape: several clients close right after the last byte, at once."""
        def one():
            for _ in range(3):
                send_then_end(h.srv, mp_req(h.w), None, "fin")
        ts = [threading.Thread(target=one) for _ in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
    cases.append(Case("upload-cl fin @all x12 in 4 threads", upload_fin_burst, ci=True))

    def over_limit_cl(h):
        c = Conn(h.srv)
        c.send(upload_head(h.w, 600 * MIB) + body)
        c.read(until=b"\r\n\r\n", timeout=5)
        assert c.status() == 413, "600 MiB declared: %r" % c.got[:200]
        return [c.end("hold")]
    cases.append(Case("upload-cl 600 MiB declared (413) then held", over_limit_cl, ci=True))

    def over_mime_limit(h):
        """A text file past its 100 MiB limit, streamed: 413 while the body arrives."""
        big_part = ('--%s\r\nContent-Disposition: form-data; name="file"; filename="b.txt"\r\n'
                    'Content-Type: text/plain\r\n\r\n' % BOUNDARY).encode()
        c = Conn(h.srv)
        c.send(upload_head(h.w, len(big_part) + 101 * MIB + 100) + big_part)
        piece = b"y" * MIB
        for _ in range(101):
            if not c.send(piece):
                break
        c.read(until=b"\r\n\r\n", timeout=5)
        assert c.status() == 413, "101 MiB text file: %r" % c.got[:200]
        c.end("rst")
    cases.append(Case("upload-cl text file over its limit while streaming (413) rst",
                      over_mime_limit))

    # -- chunked upload -------------------------------------------------------------------------
    def chunked_req(size, tail):
        def build(w):
            body, marks = multipart(size)
            # The part's head and the file data in one chunk, the file still open (the writer
            # busy), then the malformed chunk line; tail() gets the rest of the body.
            cut = marks["file-end"]
            return upload_head(w, chunked=True) + chunk(body[:cut]) + tail(body[cut:])
        return build

    MALFORMED = {
        "ZZZZ": lambda rest: b"ZZZZ\r\n",
        "-1": lambda rest: b"-1\r\n",
        "overflow": lambda rest: b"FFFFFFFFFFFFFFFFFFFFFF\r\n",
        "no-crlf": lambda rest: b"10XX" + rest,
        "ext-garbage": lambda rest: b"5;\x01\x02=\x7f\r\n" + rest[:5] + b"\r\n",
        "short-data": lambda rest: b"%x\r\n" % (len(rest) + 100) + rest + b"\r\n0\r\n\r\n",
    }
    for size in (512 * KIB, 1 * MIB, 2 * MIB, 5 * MIB):
        for mname, tail in MALFORMED.items():
            # The writer is behind (and the use-after-free of a resumed request showed) once
            # the first chunk is a few MiB.
            ci = (size == 5 * MIB and mname == "ZZZZ") or (size == 1 * MIB and mname == "overflow")
            for how in ("fin", "hold"):
                def run(h, size=size, tail=tail, how=how):
                    c = Conn(h.srv)
                    c.send(chunked_req(size, tail)(h.w))
                    if how == "fin":
                        c.read(until=b"\r\n\r\n", timeout=5)
                    return [c.end(how)]
                cases.append(Case("upload-chunked %s after %d KiB, %s" % (
                    mname, size // KIB, "then FIN" if how == "fin" else "then held"), run,
                    ci=ci and (how == "fin" or mname == "ZZZZ")))

    def chunked_burst(h):
        """The report's shape: 4 threads x 6 requests, ZZZZ after chunks of 0.5 to 5 MiB."""
        def one():
            for size in (512 * KIB, 1 * MIB, 2 * MIB, 3 * MIB, 4 * MIB, 5 * MIB):
                c = Conn(h.srv)
                c.send(chunked_req(size, MALFORMED["ZZZZ"])(h.w))
                c.read(until=b"\r\n\r\n", timeout=5)
                c.end("fin")
        ts = [threading.Thread(target=one) for _ in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
    cases.append(Case("upload-chunked ZZZZ after 0.5-5 MiB x24 in 4 threads", chunked_burst,
                      ci=True))

    def chunked_ok(h):
        body, _ = multipart(700 * KIB)
        c = Conn(h.srv)
        c.send(upload_head(h.w, chunked=True) + chunk(body[:400 * KIB]) + chunk(body[400 * KIB:]) +
               b"0\r\n\r\n")
        c.read(until=b"}")
        assert c.status() == 201, "complete chunked upload: %r" % c.got[:300]
        c.end("fin")
    cases.append(Case("upload-chunked complete (control: 201)", chunked_ok, ci=True))

    cbody, _ = multipart(1 * MIB)

    def chunked_cut(w):
        return upload_head(w, chunked=True) + chunk(cbody[:600 * KIB]) + chunk(cbody[600 * KIB:]) + \
            b"0\r\n\r\n"
    cases += offset_cases(
        "upload-chunked", chunked_cut,
        {"mid-chunk-size": lambda d: hend(d) + 2,
         "mid-first-chunk": lambda d: hend(d) + 300 * KIB,
         "second-chunk-size": lambda d: hend(d) + 7 + 600 * KIB + 2 + 3,
         "before-last-chunk": lambda d: len(d) - 5, "last-but-one": lambda d: len(d) - 1,
         "all": lambda d: len(d)},
        ci_marks=("mid-first-chunk",),
        stall_marks=("mid-chunk-size", "mid-first-chunk", "before-last-chunk"),
        ci_stall=("before-last-chunk",))

    # -- presigned PUT (local driver) -----------------------------------------------------------
    PUT_SIZE = 1 * MIB

    def put_req(size=PUT_SIZE, declared=None, chunked=False):
        def build(w):
            url = w.presign("p.txt", size)["presignedUrl"]
            head = upload_head(w, declared if declared is not None else size, chunked=chunked,
                               ctype="text/plain", method="PUT", path=path_of(url))
            data = b"p" * size
            return head + (chunk(data[:size // 2]) + b"ZZZZ\r\n" if chunked else data)
        return build

    def put_marks():
        return {"start": 0, "request-line": 7, "headers": lambda d: (len(d) - PUT_SIZE) // 2,
                "body-start": lambda d: len(d) - PUT_SIZE, "mid-body": lambda d: len(d) - PUT_SIZE // 2,
                "last-but-one": lambda d: len(d) - 1, "all": lambda d: len(d)}
    cases += offset_cases("put", put_req(), put_marks(), ci_marks=("mid-body", "all"),
                          stall_marks=("headers", "body-start", "mid-body", "last-but-one"),
                          ci_stall=("mid-body",))

    def put_ok(h):
        c = Conn(h.srv)
        c.send(put_req()(h.w))
        c.read(until=b"\r\n\r\n")
        assert c.status() in (200, 204), "complete PUT: %r" % c.got[:300]
        c.end("fin")
    cases.append(Case("put complete (control: 2xx)", put_ok, ci=True))

    for size in (512 * KIB, 2 * MIB, 5 * MIB):
        def put_chunked(h, size=size):
            c = Conn(h.srv)
            c.send(put_req(size, chunked=True)(h.w))
            c.read(until=b"\r\n\r\n", timeout=5)
            c.end("fin")
        cases.append(Case("put-chunked ZZZZ after %d KiB" % (size // 2 // KIB), put_chunked,
                          ci=size == 2 * MIB))

    def put_over(h):
        c = Conn(h.srv)
        c.send(put_req(PUT_SIZE, declared=600 * MIB)(h.w))
        c.read(until=b"\r\n\r\n", timeout=5)
        return [c.end("hold")]
    cases.append(Case("put 600 MiB declared then held", put_over))

    def put_wrong_size(h):
        c = Conn(h.srv)
        c.send(put_req(PUT_SIZE, declared=PUT_SIZE + 1)(h.w))
        c.read(until=b"\r\n\r\n", timeout=5)
        assert c.status() == 403, "Content-Length not the signed size: %r" % c.got[:200]
        c.end("rst")
    cases.append(Case("put Content-Length not the signed one (403) rst", put_wrong_size, ci=True))

    # -- download (presigned GET) -------------------------------------------------------------
    def dl_req(w):
        return get_head(w, path_of(w.download_url()), auth=False)
    cases += get_answer_cases("download", dl_req,
                              ((1, "1 byte"), (b"\r\n\r\n", "the headers"), (MIB, "1 MiB"),
                               (DOWNLOAD_SIZE - 10, "all but the end")), ci_read="1 MiB")

    def dl_ok(h):
        c = Conn(h.srv)
        c.send(dl_req(h.w))
        c.read(n=DOWNLOAD_SIZE + 200, timeout=30)
        head, _, rest = c.got.partition(b"\r\n\r\n")
        assert c.status() == 200 and len(rest) == h.w.download_size, (
            "download: status %s, %d of %d bytes" % (c.status(), len(rest), h.w.download_size))
        c.end("fin")
    cases.append(Case("download complete (control)", dl_ok, ci=True))

    def dl_slow(h):
        """A reader slower than the disk: the worker has bytes queued when it reaches the end of
        the file, and every one of them must still reach the client before the close."""
        c = Conn(h.srv, rcvbuf=64 * KIB)
        c.send(dl_req(h.w))
        c.read_slowly(0.001)
        head, _, rest = c.got.partition(b"\r\n\r\n")
        assert c.status() == 200 and len(rest) == h.w.download_size, (
            "slow download: status %s, %d of %d bytes, then the connection ended" % (
                c.status(), len(rest), h.w.download_size))
        c.end("fin")
    cases.append(Case("download read slowly (control: every byte)", dl_slow, ci=True))

    def dl_noread(h):
        """Never reads, with a 4 KiB receive buffer: the server's write makes no progress and
        STREAM_WRITE_TIMEOUT_SECONDS must end the download."""
        return send_then_end(h.srv, dl_req(h.w), None, "deaf", rcvbuf=4096)
    cases.append(Case("download never read (SO_RCVBUF 4 KiB), held", dl_noread, ci=True))

    def dl_reads_headers_then_stops(h):
        return send_then_end(h.srv, dl_req(h.w), None, "deaf", read_first=b"\r\n\r\n",
                             rcvbuf=4096)
    cases.append(Case("download reads the headers then stops, held", dl_reads_headers_then_stops))

    # -- event streams ------------------------------------------------------------------------
    def streams(w):
        return {
            "user": ("/api/events/users/me/events", w.user_chan, w.user_first),
            "mentorship": ("/api/events/mentorships/%s/events" % w.mentorship, w.ment_chan,
                           w.ment_first),
        }

    for kind in ("user", "mentorship"):
        for replay in (False, True):
            tag = "sse-%s%s" % (kind, " Last-Event-ID" if replay else "")

            def req(w, kind=kind, replay=replay):
                path, _, first = streams(w)[kind]
                return get_head(w, path, first if replay else None)
            cases += offset_cases(tag, req, {"start": 0, "request-line": 7,
                                             "headers": lambda d: len(d) // 2,
                                             "last-but-one": lambda d: len(d) - 1,
                                             "all": lambda d: len(d)},
                                  ci_marks=("all",) if replay else (),
                                  stall_marks=("headers",))
            reads = [(b"retry: 3000\n\n", "the first frame")]
            if replay:
                reads += [(256 * KIB, "256 KiB of the replay"), (2 * MIB, "2 MiB of the replay")]
            for read, label in reads:
                for how in ENDS:
                    def run(h, req=req, read=read, how=how):
                        return send_then_end(h.srv, req(h.w), None, how, read_first=read)
                    cases.append(Case("%s %s after %s" % (tag, how, label), run,
                                      ci=how == "rst" and label != "the first frame"
                                      or (how == "fin" and not replay)))

            def control(h, kind=kind, replay=replay):
                path, chan, first = streams(h.w)[kind]
                c = Conn(h.srv)
                c.send(get_head(h.w, path, first if replay else None))
                if replay:
                    c.read(n=h.w.history_bytes // 2, timeout=30)
                    assert c.got.count(b"event: endings") > HISTORY_EVENTS // 4, (
                        "replay: %d events" % c.got.count(b"event: endings"))
                else:
                    c.read(until=b"retry: 3000\n\n")
                    assert c.status() == 200, c.got[:200]
                c.end("rst")
            cases.append(Case("%s open and read (control)" % tag, control, ci=True))

            def noread(h, kind=kind, replay=replay):
                """Never reads: the replay (or a flood of live events) fills the socket and the
                write deadline must end the stream."""
                path, chan, first = streams(h.w)[kind]
                c = Conn(h.srv, rcvbuf=4096)
                c.send(get_head(h.w, path, first if replay else None))
                if not replay:
                    time.sleep(0.5)  # subscribed
                    publish_many(chan, 1200, HISTORY_PAD)
                return [c.end("deaf")]
            cases.append(Case("%s never read (SO_RCVBUF 4 KiB)%s, held" % (
                tag, "" if replay else " with 9 MiB of live events"), noread, ci=True))

    # -- calendar feed: rendered on the thread pool, then written --------------------------------
    def feed_req(w):
        return get_head(w, w.feed_path, auth=False)
    cases += get_answer_cases("calendar-feed", feed_req,
                              ((b"\r\n\r\n", "the headers"), (256 * KIB, "256 KiB"),
                               (2 * MIB, "2 MiB")), ci_read="256 KiB")

    def feed_ok(h):
        c = Conn(h.srv)
        c.send(feed_req(h.w))
        c.read(until=b"END:VCALENDAR\r\n", timeout=30)
        n = c.got.count(b"BEGIN:VEVENT")
        assert c.status() == 200 and n == FEED_SESSIONS, (
            "feed: status %s, %d of %d events" % (c.status(), n, FEED_SESSIONS))
        c.end("fin")
    cases.append(Case("calendar-feed complete (control: every session)", feed_ok, ci=True))

    def feed_slow(h):
        """A reader slower than the write deadline (2 s here) that keeps reading: it gets the
        whole feed (before, a whole answer had one deadline from its write, progress or not,
        and a feed of megabytes on a slow link was cut)."""
        # The kernel's send buffer takes megabytes of the answer at once; this reader takes
        # longer than the deadline to drain it, while the worker's own queue does not move:
        # only what the client's side acknowledges shows that it reads.
        c = Conn(h.srv, rcvbuf=4 * KIB)
        c.send(feed_req(h.w))
        start = time.monotonic()
        c.read_slowly(0.012, until=b"END:VCALENDAR\r\n")
        took = time.monotonic() - start
        n = c.got.count(b"BEGIN:VEVENT")
        assert c.status() == 200 and n == FEED_SESSIONS, (
            "slow feed: status %s, %d of %d events in %.1f s, then the connection ended" % (
                c.status(), n, FEED_SESSIONS, took))
        assert took > DEADLINE, "read in %.1f s: not slower than the deadline" % took
        c.end("fin")
    cases.append(Case("calendar-feed read slowly past the write deadline (control: every byte)",
                      feed_slow, ci=True))

    def feed_noread(h):
        return send_then_end(h.srv, feed_req(h.w), None, "deaf", rcvbuf=4096)
    cases.append(Case("calendar-feed never read (SO_RCVBUF 4 KiB), held", feed_noread, ci=True))

    def feed_unread_memory(h):
        """One feed nobody reads: the worker holds it once (what CALENDAR_FEED_MEMORY_MAX
        counts), not once in the request and again as the unwritten tail of the answer."""
        c = Conn(h.srv)
        c.send(feed_req(h.w))
        c.read(until=b"END:VCALENDAR\r\n", timeout=30)
        size = len(c.got)
        c.end("fin")
        time.sleep(0.3)
        base = Snapshot(h.srv, h.pid).rss
        c = Conn(h.srv, rcvbuf=4096)
        c.send(feed_req(h.w))
        c.wait_answer()
        time.sleep(0.3)
        held = Snapshot(h.srv, h.pid).rss - base
        h.note("a %.1f MiB feed unread: RSS +%.1f MiB" % (size / MIB, held / MIB))
        if not h.asan:
            assert held < size * 1.2, (
                "a %.1f MiB feed unread holds %.1f MiB" % (size / MIB, held / MIB))
        return [c.s]
    cases.append(Case("calendar-feed never read: memory of one feed", feed_unread_memory,
                      ci=True))

    def feed_burst(h):
        """Clients that leave as soon as they have asked: their feeds wait for the pool or
        are being rendered when they go; each job's rows and body go with its request."""
        def one():
            for how in ("fin", "rst") * 6:
                send_then_end(h.srv, feed_req(h.w), None, how)
        ts = [threading.Thread(target=one) for _ in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
    cases.append(Case("calendar-feed fin/rst @all x48 in 4 threads", feed_burst, ci=True))

    def feed_unread_burst(h):
        """Feeds nobody reads, asked for on K connections at once: what their rows and bodies
        hold together stays within CALENDAR_FEED_MEMORY_MAX and one feed; the rest get 503
        with Retry-After (before the bound every one was rendered and held, 3.5 MiB each)."""
        k = 8
        base = Snapshot(h.srv, h.pid).rss
        held = []
        for _ in range(k):
            c = Conn(h.srv, rcvbuf=4096)
            c.send(feed_req(h.w))
            held.append(c)
        statuses = []
        for c in held:
            c.wait_answer()
            head = c.s.recv(512, socket.MSG_PEEK)
            m = re.match(rb"HTTP/1\.1 (\d{3})", head)
            statuses.append(int(m.group(1)) if m else None)
            if statuses[-1] == 503:
                assert b"Retry-After: 30" in head, head
        peak = Snapshot(h.srv, h.pid).rss
        h.note("unread feeds: statuses %s, RSS +%.1f MiB (CALENDAR_FEED_MEMORY_MAX %d MiB)" % (
            statuses, (peak - base) / MIB, FEED_CAP // MIB))
        assert 200 in statuses and 503 in statuses, statuses
        assert set(statuses) <= {200, 503}, statuses
        if not h.asan:
            assert peak - base < FEED_CAP + 8 * MIB, (
                "%d unread feeds hold %.1f MiB" % (k, (peak - base) / MIB))
        return [c.s for c in held]
    cases.append(Case("calendar-feed x8 never read: memory of all feeds", feed_unread_burst,
                      ci=True))

    def feed_after(h):
        """After the feeds above (left, unread, refused), the worker's feed budget is given
        back: feeds are answered again (a budget that drifted up answers 503 for good)."""
        for _ in range(3):
            feed_ok(h)
    cases.append(Case("calendar-feed after the others: the budget given back", feed_after,
                      ci=True))

    def replay_burst(h):
        """Replays nobody reads: K streams resume from the start of an 8 MiB history and never
        read. Together they may hold REPLAY_MEMORY_MAX (8 MiB here) and some slack, not K
        histories (before the bound: +12.5 MiB per stream, +100 MiB for 8)."""
        k = 8
        base = Snapshot(h.srv, h.pid).rss
        held = []
        for i in range(k):
            path, _, first = streams(h.w)["user" if i % 2 else "mentorship"]
            c = Conn(h.srv, rcvbuf=4096)
            c.send(get_head(h.w, path, first))
            c.wait_answer()
            held.append(c.s)
        peak = base
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            try:
                peak = max(peak, Snapshot(h.srv, h.pid).rss)
            except OSError:
                break  # the worker died: the checks report it
            time.sleep(0.05)
        grew = peak - base
        h.note("replay burst: RSS +%.1f MiB for %d streams (history %.1f MiB, "
               "REPLAY_MEMORY_MAX %d MiB)" % (grew / MIB, k, h.w.history_bytes / MIB,
                                              REPLAY_CAP // MIB))
        if not h.asan:
            assert grew < REPLAY_CAP + REPLAY_SLACK, (
                "%d unread replays hold %.1f MiB (REPLAY_MEMORY_MAX %d MiB + %d MiB slack)"
                % (k, grew / MIB, REPLAY_CAP // MIB, REPLAY_SLACK // MIB))
        return held
    cases.append(Case("sse replay x8 never read: memory of all replays", replay_burst, ci=True))
    return cases


# ---- running ------------------------------------------------------------------------------


def rss_tolerance(asan):
    """How far VmRSS may rise past the high-water mark of the clean cases before it. Normal
    build: 24 MiB. With the malloc settings above, blocks of 128 KiB and more are mapped and
    unmapped, so what stays is glibc keeping freed small blocks for reuse: a replay of the 8 MiB
    history (1,000 events of 8 KiB, each its own allocations) left the heap up to 15 MiB above its
    earlier high-water mark on the fixed build, once, and not again when repeated (--repeat). A
    case that keeps what it streamed (a download, a replay, the buffers of a writer per request
    of a burst) passes 24 MiB; smaller leaks are the descriptors' and .tmp checks' (each leaked
    writer holds a descriptor and a file) and LeakSanitizer's. ASan build: not checked (None):
    its quarantine keeps up to 256 MiB of freed memory resident, and LeakSanitizer reports leaks
    at exit instead."""
    env = os.environ.get("ENDINGS_RSS_TOLERANCE_MIB")
    if env:
        return float(env) * MIB
    return None if asan else 24 * MIB


class Harness:
    def __init__(self, srv, world=None, out=print):
        self.srv = srv
        self.w = world
        self.out = out
        self.pid = None
        self.base = None
        self.asan = False
        self.notes = []
        self.log_pos = 0

    def note(self, s):
        self.notes.append(s)

    def worker_ready(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.srv.worker()
            if pid:
                try:
                    self.srv.metrics()
                    return pid
                except Exception:
                    pass
            time.sleep(0.1)
        raise AssertionError("no worker answering")

    def baseline(self, tries=5):
        for i in range(tries):
            try:
                self.pid = self.worker_ready()
                self.asan = self.srv.asan()
                # Let the pool, Redis and the thread pool settle, then take the snapshot.
                time.sleep(0.3)
                self.base = Snapshot(self.srv, self.pid)
                # 0 unless an earlier case crashed a worker (that case failed then).
                self.restarts = self.srv.metrics().get("coachd_worker_restarts_total")
                self.tol = rss_tolerance(self.asan)
                if self.srv.worker() == self.pid:
                    return
            except (OSError, AssertionError, ValueError):
                if i == tries - 1:
                    raise
            time.sleep(0.5)
        # log_pos is not moved here: a report written meanwhile goes to the next case's checks.

    def rebaseline(self, wait=3):
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            pid = self.srv.worker()
            if pid and not Snapshot(self.srv, pid).clients:
                break
            time.sleep(0.1)
        self.baseline()

    def warm_up(self, cases):
        """Runs cases once without checks, so pools and caches reach their working size, then
        takes the baseline."""
        self.baseline()
        for c in cases:
            try:
                held = c.run(self) or []
            except Exception:
                held = []
            time.sleep(0.1)
            for s in held:
                if s:
                    s.close()
        time.sleep(SETTLE / 2)
        self.baseline()

    def check(self, settle):
        """Problems after a case (empty: clean)."""
        problems = []
        deadline = time.monotonic() + settle
        snap = None
        clean_once = False
        while True:
            pid = self.srv.worker()
            if pid != self.pid:
                problems.append("worker %s replaced by %s" % (self.pid, pid))
                break
            try:
                snap = Snapshot(self.srv, pid)
            except OSError:  # the worker died meanwhile: the pid check says so next
                time.sleep(0.2)
                continue
            left = self.leftovers(snap)
            if not left and not clean_once:
                # Clean twice, 0.15 s apart: an ending the worker has not yet seen (a
                # connection still in the backlog) must not pass for one it has handled.
                clean_once = True
                time.sleep(0.15)
                continue
            if not left:
                break
            clean_once = False
            if time.monotonic() > deadline:
                problems += left
                break
            time.sleep(0.05)
        log = self.srv.log_text(self.log_pos)
        self.log_pos += len(log.encode())
        hits = [line for line in log.splitlines() if SANITIZER.search(line)]
        if hits:
            problems.append("coachd log: " + " | ".join(hits[:4]))
        if not any(p.startswith("worker") for p in problems):
            try:
                restarts = self.srv.metrics().get("coachd_worker_restarts_total")
                if restarts != self.restarts:
                    problems.append("coachd_worker_restarts_total = %s (was %s)" % (
                        restarts, self.restarts))
            except Exception as e:  # the worker died just now
                problems.append("/metrics: %s" % e)
        return problems, snap, log if hits else ""

    def leftovers(self, snap):
        b = self.base
        left = []
        # Relative to the baseline, which holds what an earlier failed case left (reported
        # there once).
        if len(snap.clients) > len(b.clients):
            left.append("%d accepted connection(s) still open" % (len(snap.clients) - len(b.clients)))
        new_files = sorted(set(snap.storage) - set(b.storage))
        if new_files:
            left.append("storage files open: %s" % ", ".join(new_files[:3]))
        if snap.other != b.other:
            left.append("descriptors %s, baseline %s" % (dict(sorted(snap.other.items())),
                                                         dict(sorted(b.other.items()))))
        extra = sorted(set(snap.tmp) - set(b.tmp))
        if extra:
            left.append("STORAGE_DIR/.tmp: %s" % ", ".join(extra[:3]))
        if self.tol is not None and snap.rss > b.rss + self.tol:
            left.append("RSS %.1f MiB, baseline %.1f MiB (+%.1f > %.0f MiB allowed)" % (
                snap.rss / MIB, b.rss / MIB, (snap.rss - b.rss) / MIB, self.tol / MIB))
        return left

    def run_case(self, case):
        """Runs one case; returns (ok, message)."""
        late = None
        if self.srv.worker() != self.pid:  # died after the previous case's checks
            late = "worker %s died before this case began (after the previous case)" % self.pid
            self.baseline()
        t0 = time.monotonic()
        self.notes = []
        held = []
        problems = [late] if late else []
        try:
            held = case.run(self) or []
        except AssertionError as e:
            problems.append("client: %s" % e)
        except Exception as e:
            problems.append("client: %r" % e)
        try:
            more, snap, log = self.check(case.settle)
            problems += more
        finally:
            for s in held:
                if s:
                    try:
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    except OSError:
                        pass
                    s.close()
        dt = time.monotonic() - t0
        if not problems and snap is not None:
            # glibc keeps freed small blocks for reuse: the high-water mark of a clean case is
            # the worker's working size, and a leak shows as growth past it.
            self.base.rss = max(self.base.rss, snap.rss)
        if any(p.startswith("worker") or "restarts" in p or "/metrics" in p for p in problems):
            # A crash: report it, then go on against the replacement.
            self.baseline()
            if log:
                problems.append("report:\n" + "\n".join(log.splitlines()[:40]))
        elif problems:
            if snap is not None:
                problems.append("now: " + snap.describe())
                problems.append("baseline: " + self.base.describe())
            # What this case left is reported once: the next cases are judged from here.
            self.rebaseline()
        msg = "; ".join(self.notes)
        if problems:
            msg = (msg + "; " if msg else "") + "\n      ".join(problems)
        return not problems, "%.1fs %s" % (dt, msg)


def warm_up_cases(cases):
    """The controls and the single receivers that never read: what brings the heap to its
    working size (the replay burst is left out: it is the measure of memory per replay)."""
    return [c for c in cases if "control" in c.name or
            ("never read" in c.name and "x8" not in c.name)]


def select(which, match=None):
    """The cases of the table `which` (ci or full) whose name contains `match`."""
    cases = [c for c in build_table() if which == "full" or c.ci]
    if match:
        cases = [c for c in cases if match in c.name]
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", choices=("ci", "full"), default="full")
    ap.add_argument("--match", help="only cases whose name contains this")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each case this many times (a leak grows, a cache does not)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--workdir", help="folder for coachd's storage and log (default: a temporary one)")
    args = ap.parse_args()
    cases = [c for c in select(args.table, args.match) for _ in range(args.repeat)]
    if args.list:
        for c in cases:
            print(c.name)
        print("%d cases" % len(cases))
        return 0
    workdir = args.workdir or tempfile.mkdtemp(prefix="coachd-endings-")
    os.makedirs(workdir, exist_ok=True)
    srv = Coachd(workdir)
    # The world is made through the API; without a test server, through this coachd.
    os.environ.setdefault("COACHD_URL", srv.base)
    for var in ("DATABASE_URL", "REDIS_URL"):
        os.environ.setdefault("COACHD_" + var, os.environ.get(var, ""))
    t0 = time.monotonic()

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)  # stop coachd on the way out (finally below)
    srv.start()
    passed = failed = 0
    results = []
    h = None
    try:
        w = World(srv)
        h = Harness(srv, w)
        h.warm_up(warm_up_cases(build_table()))
        print("coachd %s, worker %d%s; baseline: %s" % (
            srv.binary, h.pid, " (ASan)" if h.asan else "", h.base.describe()), flush=True)
        for c in cases:
            ok, msg = h.run_case(c)
            results.append({"case": c.name, "ok": ok, "detail": msg})
            if ok:
                passed += 1
            else:
                failed += 1
            print("%s %s  %s" % ("ok  " if ok else "FAIL", c.name, msg), flush=True)
    finally:
        rc = srv.stop()
        tail = srv.log_text()
        print("coachd exit status %s; log: %s" % (rc, srv.log_path))
    if rc != 0 or SANITIZER.search(srv.log_text(h.log_pos) if h else tail):
        failed += 1
        print("FAIL coachd exit (status %s; a report after the last case):\n%s" % (
            rc, tail[-3000:]))
    else:
        passed += 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "seconds": time.monotonic() - t0}, f, indent=1)
    print("%d cases in %.0f s" % (len(cases), time.monotonic() - t0))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
