"""Fixtures of the mentorship and session tests.

Organizations and memberships are written with SQL here (the organization endpoints of
orgs.py are built in another area); users sign up through the API. Also: mentorship and
session factories through the API, push-token rows, and a Redis subscriber for the events."""
import datetime
import json
import os
import queue
import socket
import threading
import time
import uuid
from urllib.parse import urlsplit

from helpers import REDIS_URL, psql, sign_up, unique_email
from orgs import make_platform_admin

ROLES = ("OrganizationAdmin", "Manager", "Coach", "Teacher")


class MentOrg:
    """An organization with one signed-in member per role (clients carry X-Organization-Id).

    org.id, org.clients[key], org.users[key]; add_member(role, key=...) adds more."""

    def __init__(self, roles=ROLES, name=None):
        self.id = str(uuid.uuid4())
        self.name = name or "Org %s" % self.id[:8]
        psql("INSERT INTO organizations (id, name) VALUES (:'id', :'name')", id=self.id,
             name=self.name)
        self.clients, self.users = {}, {}
        for role in roles:
            self.add_member(role)

    def add_member(self, role, key=None, first="Member", last=None, lang=None, tz=None,
                   status="active"):
        c, u = sign_up(email=unique_email(role.lower()), name="%s %s" % (first, last or role),
                       lang=lang)
        psql("INSERT INTO organization_memberships (organization_id, user_id,"
             " role_in_organization, membership_status) VALUES (:'o', :'u', :'r', :'s')",
             o=self.id, u=u["id"], r=role, s=status)
        if tz:
            psql("UPDATE users SET timezone = :'tz' WHERE id = :'u'", tz=tz, u=u["id"])
        c.org(self.id)
        self.clients[key or role] = c
        self.users[key or role] = u
        return c, u

    def client(self, key):
        return self.clients[key]

    def uid(self, key):
        return self.users[key]["id"]


def platform_admin(org_id=None):
    c, u = make_platform_admin()
    if org_id:
        c.org(org_id)
    return c, u


def make_mentorship(org, coach="Coach", teacher="Teacher", status="active", by="Manager",
                    **fields):
    """Creates a mentorship through the API (as `by`) and moves it to `status`."""
    body = {"organizationId": org.id, "coachId": org.uid(coach), "teacherId": org.uid(teacher)}
    body.update(fields)
    m = org.client(by).post_json("/api/mentorships", body, expect=201)["data"]
    steps = {"pending": [], "active": ["active"], "paused": ["active", "paused"],
             "ended": ["ended"]}[status]
    for step in steps:
        m = org.client("Manager").patch_json("/api/mentorships/%s" % m["id"],
                                             {"status": step})["data"]
    return m


def iso(dt):
    return dt.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + \
        "%03dZ" % (dt.microsecond // 1000)


def future(hours=24, minutes=0):
    """A whole-minute UTC time in the future (ISO 8601)."""
    t = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0)
    return iso(t + datetime.timedelta(hours=hours, minutes=minutes))


def make_session(org, mentorship_id, by="Coach", expect=201, **fields):
    body = {"mentorshipId": mentorship_id, "scheduledAt": fields.pop("scheduledAt", future())}
    body.update(fields)
    return org.client(by).post_json("/api/sessions", body, expect=expect)


def add_push_token(user_id, token=None, platform="ios"):
    token = token or "ExponentPushToken[%s]" % uuid.uuid4().hex
    psql("INSERT INTO push_tokens (token, user_id, platform) VALUES (:'t', :'u', :'p')",
         t=token, u=user_id, p=platform)
    return token


class RedisSub:
    """SUBSCRIBE to Redis channels over a raw socket (RESP); events arrive on a queue.

        with RedisSub("mentorship:<id>") as sub:
            ev = sub.next("session-update")   # {"channel", "id", "event", "data"}
    """

    def __init__(self, *channels, url=REDIS_URL):
        u = urlsplit(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379), 5)
        self.file = self.sock.makefile("rb")
        self.q = queue.Queue()
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
                    body["channel"] = msg[1].decode()
                    self.q.put(body)
        except (EOFError, OSError, ValueError):
            self.q.put(None)

    def next(self, event=None, timeout=5.0):
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


def env_for_second_server(port, **extra):
    """Environment of a second coachd on `port` sharing the test server's services."""
    env = dict(os.environ)
    env.setdefault("DATABASE_URL", os.environ.get("COACHD_DATABASE_URL", ""))
    env.setdefault("REDIS_URL", os.environ.get("COACHD_REDIS_URL", ""))
    env.setdefault("MAIL_DIR", os.environ.get("COACHD_MAIL_DIR", "/tmp"))
    env.setdefault("CLIENT_KEY", os.environ.get("COACHD_CLIENT_KEY", "k"))
    env.update(PORT=str(port), HOST="127.0.0.1", WORKERS="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env
