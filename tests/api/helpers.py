"""Helpers for the black-box API tests: an HTTP client, the mail and push sinks, psql.

Everything is configured by the environment that scripts/test sets:

    COACHD_URL            base URL of the running coachd (http://127.0.0.1:PORT)
    COACHD_CLIENT_KEY     the server's CLIENT_KEY (X-Client-Key for /api/health)
    COACHD_MAIL_DIR       folder where the SMTP sink stores every message as .eml
    COACHD_PUSH_DIR       folder where the push sink stores every request as .json
    COACHD_DATABASE_URL   the server's database (psql helper)
    COACHD_REDIS_URL      the server's Redis (redis-cli helper)
    COACHD_LOG_FILE       the server's log (stderr)
    COACHD_BIN            the binary under test (build/coachd, build-asan/coachd with SANITIZE=1),
                          for tests that start a second server with other settings (second_coachd)
    COACHD_TEST_PG_RESTART  shell command that restarts the server's PostgreSQL
    COACHD_TEST_PG_CTL      shell command that takes start|stop|restart|status
"""
import contextlib
import email
import email.policy
import glob
import html
import json
import os
import queue
import random
import re
import shlex
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from urllib.parse import parse_qs, urlsplit

import requests
from requests.adapters import HTTPAdapter

BASE_URL = os.environ.get("COACHD_URL", "http://127.0.0.1:8080").rstrip("/")
CLIENT_KEY = os.environ.get("COACHD_CLIENT_KEY", "test-client-key")
MAIL_DIR = os.environ.get("COACHD_MAIL_DIR", "")
PUSH_DIR = os.environ.get("COACHD_PUSH_DIR", "")
DATABASE_URL = os.environ.get("COACHD_DATABASE_URL", "")
REDIS_URL = os.environ.get("COACHD_REDIS_URL", "")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PASSWORD = "correct horse battery"
SESSION_COOKIE = "auth.session_token"
TIMEOUT = 15


def unique_email(prefix="user"):
    """A fresh address for every call, so tests never share an account or a rate-limit key."""
    return "%s-%s@example.com" % (prefix, uuid.uuid4().hex[:12])


class SourceAddressAdapter(HTTPAdapter):
    """Connects from a chosen local address."""

    def __init__(self, ip):
        self.ip = ip
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.ip, 0)
        return super().init_poolmanager(*args, **kwargs)


def loopback_ip():
    """A random address in 127.0.0.0/8 outside 127.0.0.0/16 (which tests may use on purpose)."""
    return "127.%d.%d.%d" % (random.randint(1, 254), random.randint(0, 255), random.randint(1, 254))


class Client(requests.Session):
    """requests.Session bound to the server: paths starting with / are joined to COACHD_URL,
    every call has a timeout, and JSON helpers return (response, parsed body).

    Each client connects from its own loopback address (`ip`), so it is its own client IP to
    the per-IP rate limits: tests do not use up each other's sign-up and sign-in allowance.
    Pass source_ip to choose it (e.g. the same for two clients), or source_ip=False for none."""

    def __init__(self, base_url=BASE_URL, org_id=None, client_key=None, source_ip=None):
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.user = None  # set by sign_up / sign_in
        self.ip = None
        if source_ip is not False and urlsplit(self.base_url).hostname.startswith("127."):
            self.ip = source_ip or loopback_ip()
            self.mount("http://", SourceAddressAdapter(self.ip))
        if org_id:
            self.headers["X-Organization-Id"] = org_id
        if client_key:
            self.headers["X-Client-Key"] = client_key

    def request(self, method, url, *args, **kwargs):
        if url.startswith("/"):
            url = self.base_url + url
        kwargs.setdefault("timeout", TIMEOUT)
        kwargs.setdefault("allow_redirects", False)
        # openapi_loose=True: this request sends an undocumented field or parameter on purpose.
        loose = kwargs.pop("openapi_loose", False)
        r = super().request(method, url, *args, **kwargs)
        if url.startswith(BASE_URL) or url.startswith(self.base_url):
            import openapi_check  # every exchange is checked against docs/openapi.json
            # Session.get() follows redirects whatever the default above says: the exchange of
            # this URL is then the first answer (a 302), not the page the redirect led to.
            openapi_check.check(method, url, r.history[0] if r.history else r, loose=loose)
        return r

    def org(self, org_id):
        """Sets (or with None clears) X-Organization-Id for the following calls."""
        if org_id:
            self.headers["X-Organization-Id"] = org_id
        else:
            self.headers.pop("X-Organization-Id", None)
        return self

    @property
    def session_token(self):
        return self.cookies.get(SESSION_COOKIE)

    def call(self, method, path, body=None, expect=None, **kwargs):
        """Sends `body` as JSON (when not None); returns (response, parsed JSON or None).
        With `expect`, asserts the status code and shows the body when it differs."""
        if body is not None:
            kwargs["json"] = body
        r = self.request(method, path, **kwargs)
        data = parse_json(r)
        if expect is not None:
            assert r.status_code == expect, "%s %s: expected %d, got %d: %s" % (
                method, path, expect, r.status_code, r.text[:2000])
        return r, data

    def get_json(self, path, expect=200, **kw):
        return self.call("GET", path, expect=expect, **kw)[1]

    def post_json(self, path, body=None, expect=200, **kw):
        return self.call("POST", path, body if body is not None else {}, expect=expect, **kw)[1]

    def put_json(self, path, body=None, expect=200, **kw):
        return self.call("PUT", path, body if body is not None else {}, expect=expect, **kw)[1]

    def patch_json(self, path, body=None, expect=200, **kw):
        return self.call("PATCH", path, body if body is not None else {}, expect=expect, **kw)[1]

    def delete_json(self, path, expect=200, **kw):
        return self.call("DELETE", path, expect=expect, **kw)[1]


def parse_json(r):
    if not r.content:
        return None
    try:
        return r.json()
    except ValueError:
        return None


def assert_error(r, status, code=None):
    """Asserts the error shape of docs/api.md "Errors": {"error": {"code", "message"[, "details"]}}."""
    assert r.status_code == status, "expected %d, got %d: %s" % (status, r.status_code, r.text[:2000])
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    body = r.json()
    assert isinstance(body.get("error"), dict), body
    assert isinstance(body["error"].get("code"), str) and body["error"]["code"], body
    assert isinstance(body["error"].get("message"), str), body
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


def sign_up(email=None, password=PASSWORD, name="Test User", lang=None, client=None, expect=200):
    """Creates an account (sign-up signs in); returns (client holding the cookie, user dict).
    The user dict is the response's `user` plus `password`."""
    c = client or Client()
    body = {"email": email or unique_email(), "password": password, "name": name}
    if lang:
        body["preferredLanguage"] = lang
    data = c.post_json("/api/auth/sign-up/email", body, expect=expect)
    user = dict(data["user"]) if data and "user" in data else {"email": body["email"]}
    user["password"] = password
    c.user = user
    return c, user


def sign_in(email, password=PASSWORD, client=None, expect=200):
    c = client or Client()
    data = c.post_json("/api/auth/sign-in/email", {"email": email, "password": password},
                       expect=expect)
    if data and "user" in data:
        c.user = dict(data["user"], password=password)
    return c, data


# ---- server-sent events ----------------------------------------------------------------------


class SSEStream:
    """Reads a Server-Sent Events stream in a background thread.

        with SSEStream(client, "/api/events/...") as s:
            assert s.status == 200
            ev = s.next("message-created")   # {"event", "data" (JSON when it parses), "id"}
    """

    def __init__(self, client, path, connect_timeout=10, **kwargs):
        headers = dict(kwargs.pop("headers", {}) or {})
        headers.setdefault("Accept", "text/event-stream")
        self.response = client.get(path, stream=True, headers=headers,
                                   timeout=(connect_timeout, None), **kwargs)
        self.status = self.response.status_code
        try:  # the socket, so that close() can wake a reader blocked on it
            self._sock = self.response.raw._fp.fp.raw._sock
        except AttributeError:
            self._sock = None
        self.comments = []  # comment lines (": ping") seen so far
        # Events are checked against StreamEvent (stream_check.py); a test that feeds a stream
        # only events of its own making in bulk (not through publish_event) turns it off.
        self.check_events = True
        self._events = queue.Queue()
        self._thread = None
        if self.status == 200:
            self._thread = threading.Thread(target=self._read, daemon=True)
            self._thread.start()

    def _read(self):
        event = {"event": "message", "data": [], "id": None}
        try:
            for raw in self.response.iter_lines(chunk_size=1, decode_unicode=False):
                line = raw.decode("utf-8")
                if line == "":
                    if event["data"]:
                        text = "\n".join(event["data"])
                        try:
                            data = json.loads(text)
                        except ValueError:
                            data = text
                        self._events.put({"event": event["event"], "data": data, "id": event["id"]})
                    event = {"event": "message", "data": [], "id": None}
                elif line.startswith(":"):
                    self.comments.append(line[1:].strip())
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "data":
                        event["data"].append(value)
                    elif field in ("event", "id"):
                        event[field] = value
        except Exception:  # closed by close() or by the server
            pass
        finally:
            self._events.put(None)

    def next(self, event=None, timeout=10.0):
        """The next event (named `event`, skipping others, when given)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no SSE event %s within %.0f s" % (event or "", timeout))
            try:
                ev = self._events.get(timeout=left)
            except queue.Empty:
                continue
            if ev is None:
                self._events.put(None)
                raise AssertionError("SSE stream ended while waiting for %s" % (event or "an event"))
            if self.check_events:
                import stream_check  # every event is checked against docs/openapi.json
                stream_check.check(ev)
            if event is None or ev["event"] == event:
                return ev

    def no_event(self, event=None, wait=1.0):
        """Asserts that no event (named `event`, when given) arrives within `wait` seconds."""
        try:
            ev = self.next(event, timeout=wait)
        except AssertionError:
            return
        raise AssertionError("unexpected SSE event: %r" % ev)

    def close(self):
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(5)
        self.response.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- mail -----------------------------------------------------------------------------------

LINK_RE = re.compile(r"""https?://[^\s"'<>)\]]+""")


class Mail:
    """One message from the SMTP sink: headers, envelope, decoded text and HTML, links."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.msg = email.message_from_binary_file(f, policy=email.policy.default)
        self.subject = str(self.msg.get("Subject", ""))
        self.sender = str(self.msg.get("From", ""))
        self.to = str(self.msg.get("To", ""))
        self.envelope_to = re.findall(r"<([^>]*)>", str(self.msg.get("X-Sink-Rcpt-To", "")))
        self.text, self.html = "", ""
        for part in self.msg.walk():
            if part.is_multipart() or part.get_content_disposition() == "attachment":
                continue
            ctype = part.get_content_type()
            if ctype == "text/plain":
                self.text += part.get_content()
            elif ctype == "text/html":
                self.html += part.get_content()
        self.body = self.text or self.html
        links = LINK_RE.findall(self.text) + [html.unescape(u) for u in LINK_RE.findall(self.html)]
        self.links = list(dict.fromkeys(links))  # unique, in order

    def recipients(self):
        found = [a.lower() for a in self.envelope_to]
        found += [a.lower() for a in re.findall(r"[\w.+'-]+@[\w.-]+", self.to)]
        return found

    def link(self, contains=""):
        """The first link containing `contains`."""
        for u in self.links:
            if contains in u:
                return u
        raise AssertionError("no link with %r in %s: %s" % (contains, self.subject, self.links))

    def token(self, contains=""):
        """The `token` query parameter of the first link containing `contains`."""
        return parse_qs(urlsplit(self.link(contains)).query)["token"][0]

    def __repr__(self):
        return "<Mail to=%s subject=%r>" % (self.to, self.subject)


class MailBox:
    """Reads the SMTP sink's folder. Every test gets addresses of its own, so matching on the
    recipient is enough to keep tests apart."""

    def __init__(self, folder=MAIL_DIR):
        self.folder = folder

    # The sink renames a message into place once it is whole and never changes it again, so a
    # message is parsed once per test run: parsing the whole folder on every poll cost seconds
    # per poll late in the suite (thousands of messages), which made mail look late.
    _parsed = {}

    def all_to(self, address):
        address = address.lower()
        out = []
        for path in sorted(glob.glob(os.path.join(self.folder, "*.eml"))):
            m = MailBox._parsed.get(path)
            if m is None:
                m = MailBox._parsed[path] = Mail(path)
            if address in m.recipients():
                out.append(m)
        return out

    def wait_for(self, address, count=1, subject=None, timeout=30.0):
        """Waits until at least `count` messages to `address` (whose subject contains
        `subject`, when given) arrived; returns the last of them."""
        assert self.folder, "COACHD_MAIL_DIR is not set"
        deadline = time.monotonic() + timeout
        while True:
            found = [m for m in self.all_to(address) if subject is None or subject in m.subject]
            if len(found) >= count:
                return found[count - 1] if count else None
            if time.monotonic() > deadline:
                raise AssertionError("no mail #%d to %s within %.0f s (got %s)" % (
                    count, address, timeout, found))
            time.sleep(0.1)

    def none_to(self, address, wait=1.0):
        """Asserts that no message to `address` arrives within `wait` seconds."""
        time.sleep(wait)
        found = self.all_to(address)
        assert not found, "unexpected mail to %s: %s" % (address, found)


class PushBox:
    """Reads the push sink's folder: a list of the requests coachd sent, oldest first."""

    def __init__(self, folder=PUSH_DIR):
        self.folder = folder

    _parsed = {}  # as MailBox: the sink writes each request once, whole

    def requests(self):
        out = []
        for path in sorted(glob.glob(os.path.join(self.folder, "*.json"))):
            req = PushBox._parsed.get(path)
            if req is None:
                with open(path) as f:
                    req = PushBox._parsed[path] = json.load(f)
            out.append(req)
        return out

    def messages(self):
        """Every push message sent, flattened (a request may carry a list of them)."""
        out = []
        for req in self.requests():
            body = req["body"]
            out.extend(body if isinstance(body, list) else [body])
        return out

    def wait_for(self, token, count=1, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            found = [m for m in self.messages() if isinstance(m, dict) and (
                m.get("to") == token or (isinstance(m.get("to"), list) and token in m["to"]))]
            if len(found) >= count:
                return found[count - 1]
            if time.monotonic() > deadline:
                raise AssertionError("no push #%d to %s within %.0f s" % (count, token, timeout))
            time.sleep(0.1)


# ---- database and services ------------------------------------------------------------------

NULL = "\x1dNULL\x1d"  # what psql prints for NULL (no real value looks like it)


def psql(sql, **params):
    """Runs SQL against COACHD_DATABASE_URL with the psql client; returns the rows of the last
    statement as tuples of strings (None for NULL). Pass values as keyword arguments and refer
    to them as :'name' (a quoted literal) or :name (as is) in the SQL."""
    assert DATABASE_URL, "COACHD_DATABASE_URL is not set"
    cmd = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-F", "\x1f", "-R", "\x1e",
           "-P", "null=" + NULL, "-d", DATABASE_URL]
    for k, v in params.items():
        cmd += ["-v", "%s=%s" % (k, v)]
    # -c does not expand psql variables; standard input does.
    r = subprocess.run(cmd, input=sql, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("psql failed: %s\n%s" % (r.stderr.strip(), sql))
    if REDIS_URL and re.search(r"\b(UPDATE|INSERT|DELETE)\b", sql, re.I):
        # A change behind the server's back: drop every worker's cached caller contexts, as an
        # operator editing these tables by hand must (docs/performance.md, caller context).
        redis_cli("PUBLISH", "coachd:ctx-invalidate", "*")
    out = r.stdout.rstrip("\n")
    if not out:
        return []
    rows = []
    for line in out.split("\x1e"):
        line = line.strip("\n")
        if line == "":
            continue
        rows.append(tuple(None if v == NULL else v for v in line.split("\x1f")))
    return rows


def psql_value(sql, **params):
    """The first column of the first row, or None when there is no row."""
    rows = psql(sql, **params)
    return rows[0][0] if rows else None


def redis_cli(*args):
    """Runs redis-cli against COACHD_REDIS_URL; returns its output (stripped)."""
    assert REDIS_URL, "COACHD_REDIS_URL is not set"
    r = subprocess.run(["redis-cli", "-u", REDIS_URL, *map(str, args)], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError("redis-cli failed: %s" % r.stderr.strip())
    return r.stdout.strip()


# What rt/events.c does for one channel: keep the event in the channel's history, then publish it
# with the history's id. Returns [id, receivers].
PUBLISH_ONE = ("local id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[2]) "
               "return {id, redis.call('PUBLISH', ARGV[1], '{\"id\":\"' .. id .. '\",' .. ARGV[2])}")


def publish_event(channel, event, data):
    """Publishes an event on a stream channel as coachd does (docs/api.md "Event ids, replay and
    reset"); asserts that some stream listens; returns the event's id."""
    tail = json.dumps({"event": event, "data": data}, separators=(",", ":"))[1:]
    out = redis_cli("EVAL", PUBLISH_ONE, 1, "events:" + channel, channel, tail).split()
    assert int(out[1]) >= 1, "no stream listens on %s" % channel
    import stream_check  # not the server's event: its data is the test's own
    return stream_check.injected(out[0])


def run_command_env(var, *extra):
    """Runs the shell command held in environment variable `var` (with `extra` arguments)."""
    cmd = os.environ.get(var)
    assert cmd, "%s is not set (scripts/test sets it)" % var
    r = subprocess.run(shlex.split(cmd) + list(extra), capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d): %s" % (var, r.returncode, r.stderr.strip()))


def restart_postgres():
    run_command_env("COACHD_TEST_PG_RESTART")


def postgres_ctl(action):
    """action: start, stop, restart or status."""
    run_command_env("COACHD_TEST_PG_CTL", action)


def wait_until(predicate, timeout=10.0, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(interval)



# ---- a user's event stream, for the tests of sessions ending ----------------------------------

USER_STREAM = "/api/events/users/me/events"


def as_client(client, base):
    """A client of the coachd at `base` holding `client`'s session cookie."""
    c = Client(base_url=base)
    c.cookies.set(SESSION_COOKIE, client.session_token)
    return c


def stream_for(client, base=None):
    """The caller's own event stream (on `base` when given), open."""
    s = SSEStream(as_client(client, base) if base else client, USER_STREAM)
    assert s.status == 200, s.response.text
    return s


def ended(stream, timeout=3):
    """True when the server ends the stream within `timeout` seconds."""
    try:
        while True:
            stream.next(timeout=timeout)
    except AssertionError as e:
        return "ended" in str(e)

# ---- Redis subscriber -----------------------------------------------------------------------


class RedisSub:
    """SUBSCRIBE to Redis channels over a raw socket (RESP); the server's events arrive on a queue.

        with RedisSub("mentorship:<id>", "user:<id>") as sub:
            ev = sub.next("session-update")   # {"channel", "id", "event", "data"}
            rest = sub.drain(0.5)             # whatever else arrives within 0.5 s
            sub.messages()                    # every payload so far, without "channel"

    next() and drain() consume the queue; messages() is cumulative and independent of them."""

    def __init__(self, *channels, url=REDIS_URL):
        assert url, "COACHD_REDIS_URL is not set"
        u = urlsplit(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379), 5)
        self.file = self.sock.makefile("rb")
        self.q = queue.Queue()
        self.seen = []  # every payload, in order of arrival
        self._send("SUBSCRIBE", *channels)
        for _ in channels:  # the confirmations
            self._read()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)

    def _read(self):
        line = self.file.readline()
        if not line:
            raise EOFError
        kind, rest = line[:1], line[1:-2]
        if kind == b"*":
            return [self._read() for _ in range(int(rest))]
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)
            return data[:-2]
        if kind == b":":
            return int(rest)
        return rest

    def _loop(self):
        self.sock.settimeout(None)
        try:
            while True:
                msg = self._read()
                if isinstance(msg, list) and msg and msg[0] == b"message":
                    body = json.loads(msg[2].decode("utf-8"))
                    self.seen.append(body)
                    if isinstance(body, dict):
                        body = dict(body, channel=msg[1].decode())
                    self.q.put(body)
        except (EOFError, OSError, ValueError):
            self.q.put(None)

    def next(self, event=None, timeout=5.0):
        """The next message (with `"event": event`, skipping others, when given)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no %s event within %.0f s" % (event or "", timeout))
            try:
                m = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if m is None:
                raise AssertionError("redis subscription ended")
            if event is None or m.get("event") == event:
                return m

    def drain(self, wait=0.5):
        """Every message that arrives within `wait` seconds."""
        out = []
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            try:
                m = self.q.get(timeout=left)
            except queue.Empty:
                return out
            if m is not None:
                out.append(m)

    def messages(self, wait=2.0):
        """Every JSON payload received so far (as published: no "channel" key), oldest first.
        While none has arrived, waits up to `wait` seconds for the first."""
        deadline = time.monotonic() + wait
        while not self.seen and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.seen)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- a second coachd ------------------------------------------------------------------------


@contextlib.contextmanager
def temp_database():
    """A new empty database on the test PostgreSQL, dropped at the end; yields its URL. For a
    second coachd (or `coachd first-run`) that needs a platform nobody has initialized yet."""
    name = "coachd_tmp_%s" % uuid.uuid4().hex[:12]
    psql('CREATE DATABASE "%s"' % name)
    try:
        yield DATABASE_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        psql('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)


def psql_at(url, sql):
    """The rows of `sql` run against the database at `url` (see psql)."""
    r = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-F", "\x1f",
                        "-d", url], input=sql, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("psql failed: %s\n%s" % (r.stderr.strip(), sql))
    return [tuple(line.split("\x1f")) for line in r.stdout.splitlines() if line]


# What coachd logs when a worker dies (main.c) and what the sanitizers print.
WORKER_DEATH = r"killed by signal|exited \(status|ERROR: (Address|Leak|Thread)Sanitizer|runtime error:"


def free_port():
    """A port free on every interface, below the kernel's ephemeral range (32768 and up), so an
    outgoing connection made meanwhile cannot take it before the second server binds it."""
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


@contextlib.contextmanager
def second_coachd(host="127.0.0.1", netns=None, allow_worker_death=False, log_path=None, **env):
    """Starts another coachd (COACHD_BIN serve) with `env` over the test server's environment;
    yields its base URL once it answers /api/auth/session (a worker still waiting for its
    start-up loads leaves the connection in the backlog: a timeout is tried again), then stops it
    and asserts that it exited with 0. With `netns`, it runs inside that network namespace (nsenter --net, which
    execs the server: the process is coachd itself) and `host` is its address there.

    Defaults: PORT a free port, HOST `host` (0.0.0.0 for tests that connect from other loopback
    addresses), WORKERS 1; DATABASE_URL, REDIS_URL, MAIL_DIR and CLIENT_KEY, when not in the
    environment, from the COACHD_* variables. Values are turned into strings; None unsets the
    variable. A worker that dies (its log says so) fails the test unless allow_worker_death.
    With `log_path`, its stderr goes to that file (kept), for tests that read its log."""
    full = dict(os.environ)
    for var in ("DATABASE_URL", "REDIS_URL", "MAIL_DIR", "CLIENT_KEY"):
        if os.environ.get("COACHD_" + var):
            full.setdefault(var, os.environ["COACHD_" + var])
    full.update(PORT=str(free_port()), HOST=host, WORKERS="1")
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = str(v)
    binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
    # its stderr, shown when it fails to start or stop
    log = open(log_path, "w+b") if log_path else tempfile.TemporaryFile()
    cmd = [binary, "serve"]
    if netns:
        import netns_lab
        cmd = netns_lab.in_netns(netns) + cmd
    proc = subprocess.Popen(cmd, env=full, stdout=subprocess.DEVNULL, stderr=log)

    def log_tail():
        log.seek(0)
        return log.read().decode("utf-8", "replace")[-3000:]

    base = "http://%s:%s" % ("127.0.0.1" if host == "0.0.0.0" else host, full["PORT"])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                requests.get(base + "/api/auth/session", timeout=1)
                break
            except (requests.ConnectionError, requests.Timeout):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("second coachd did not start (exit status %s):\n%s"
                                         % (proc.poll(), log_tail())) from None
                time.sleep(0.1)
    except BaseException:
        proc.kill()
        proc.wait()
        log.close()
        raise
    try:
        yield base
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        raise
    proc.terminate()
    rc = proc.wait(timeout=15)
    log.seek(0)
    whole = log.read().decode("utf-8", "replace")
    log.close()
    assert rc == 0, "second coachd exited with %s:\n%s" % (rc, whole[-3000:])
    # Its supervisor replaces a worker that dies, so a crash leaves the exit status 0: the log
    # tells (the same rule as scripts/test's for the main server).
    death = None if allow_worker_death else re.search(WORKER_DEATH, whole)
    assert not death, "a worker of the second coachd died:\n%s" % whole[max(0, death.start() - 2000):death.start() + 2000]


# ---- browser tests ---------------------------------------------------------------------------


def parse_csp(value):
    """A Content-Security-Policy header as {directive: [sources]}; a directive twice fails."""
    out = {}
    for part in value.split(";"):
        words = part.split()
        if words:
            assert words[0] not in out, "directive %s twice" % words[0]
            out[words[0]] = words[1:]
    return out


def artifacts_dir():
    """Where tests leave what a person may look at (screenshots): COACHD_TEST_ARTIFACTS, else
    artifacts/ beside the server's log, else a new temporary folder; made when missing."""
    d = os.environ.get("COACHD_TEST_ARTIFACTS")
    if not d and os.environ.get("COACHD_LOG_FILE"):
        d = os.path.join(os.path.dirname(os.environ["COACHD_LOG_FILE"]), "artifacts")
    d = d or tempfile.mkdtemp(prefix="coachd-artifacts-")
    os.makedirs(d, exist_ok=True)
    return d
