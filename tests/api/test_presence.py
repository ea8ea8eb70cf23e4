"""GET /api/users/:id/presence (docs/api.md "Users", presence): online while a request was made in the last 60 s, lastSeen the last such moment."""
import re
import time
from datetime import datetime, timezone

from helpers import PASSWORD, Client, assert_error, redis_cli, sign_up, unique_email
from orgs import make_platform_admin, new_org

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def parse_iso(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def test_a_request_makes_the_user_online():
    org = new_org()
    t, tu = org.clients["Teacher"], org.users["Teacher"]
    m = org.clients["Manager"]
    # Forget what sign-up recorded, then make one request as the teacher.
    redis_cli("DEL", "presence:" + tu["id"], "lastseen:" + tu["id"])
    before = datetime.now(timezone.utc)
    t.get_json("/api/users/me")
    d = m.get_json("/api/users/%s/presence" % tu["id"])["data"]
    assert set(d) == {"userId", "online", "lastSeen"}
    assert d["userId"] == tu["id"] and d["online"] is True
    assert ISO.match(d["lastSeen"])
    assert abs((parse_iso(d["lastSeen"]) - before).total_seconds()) < 5
    ttl = int(redis_cli("TTL", "presence:" + tu["id"]))
    assert 0 < ttl <= 60
    # Once the heartbeat key expires the user is offline; lastSeen stays.
    redis_cli("DEL", "presence:" + tu["id"])
    d = m.get_json("/api/users/%s/presence" % tu["id"])["data"]
    assert d["online"] is False and ISO.match(d["lastSeen"])


def test_never_seen_user_is_offline_with_null_last_seen():
    pa, _ = make_platform_admin()
    uid = pa.post_json("/api/users", {"email": unique_email(), "firstName": "Never",
                                      "lastName": "Seen", "password": PASSWORD},
                       expect=201)["data"]["id"]
    d = pa.get_json("/api/users/%s/presence" % uid)["data"]
    assert d == {"userId": uid, "online": False, "lastSeen": None}


def test_presence_access_rules():
    org = new_org()
    other = new_org()
    tid = org.users["Teacher"]["id"]
    # Self, any role.
    for role in ("Teacher", "Coach"):
        c, u = org.clients[role], org.users[role]
        assert c.get_json("/api/users/%s/presence" % u["id"])["data"]["online"] is True
    c, u = sign_up()
    assert c.get_json("/api/users/%s/presence" % u["id"])["data"]["userId"] == u["id"]
    assert c.get_json("/api/users/me/presence")["data"]["userId"] == u["id"]
    # Manager and above: members of their active organization.
    for role in ("Manager", "OrganizationAdmin"):
        org.clients[role].get_json("/api/users/%s/presence" % tid)
        assert_error(org.clients[role].get("/api/users/%s/presence" % other.users["Teacher"]["id"]),
                     403, "FORBIDDEN")
    # Managers may see an OrganizationAdmin's presence (no exception in the rule).
    org.clients["Manager"].get_json("/api/users/%s/presence" % org.users["OrganizationAdmin"]["id"])
    # Teachers and coaches: only themselves.
    for role in ("Teacher", "Coach"):
        assert_error(org.clients[role].get("/api/users/%s/presence" % org.users["Manager"]["id"]),
                     403, "FORBIDDEN")
    # A user without organization: only themselves.
    assert_error(c.get("/api/users/%s/presence" % tid), 403, "FORBIDDEN")
    # PlatformAdmin and Owner: anyone.
    for role in ("PlatformAdmin", "Owner"):
        g, _ = make_platform_admin(role)
        g.get_json("/api/users/%s/presence" % tid)
        g.get_json("/api/users/%s/presence" % u["id"])
        assert_error(g.get("/api/users/cnotauser0000000000000000/presence"), 404, "NOT_FOUND")
    assert_error(org.clients["Teacher"].get("/api/users/cnotauser0000000000000000/presence"), 404)
    assert_error(Client().get("/api/users/%s/presence" % tid), 401, "UNAUTHENTICATED")
