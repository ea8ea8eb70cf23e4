"""Read-your-writes of the caller-context cache (routes/ctx_cache.h), by rounds: every kind of
change that a caller context holds is made, and the very next request, on a new connection to a
server with two workers whose caches both hold the old context, must see it. Not "soon": the
first request after the write's answer. Writes alternate between that server and the main test
server (another process: what another host is to Redis).

CTX_RYW_ROUNDS sets the rounds per kind (30 here; 1000 for the long form, see docs/testing.md);
the counts are printed (pytest -s) as "ryw KIND: N rounds, S stale, T s"."""
import os
import subprocess
import time

import pytest

from helpers import (BASE_URL, DATABASE_URL, PASSWORD, SESSION_COOKIE, Client, redis_cli,
                     second_coachd, sign_in, sign_up, unique_email)
from orgs import Org, make_platform_admin

ROUNDS = int(os.environ.get("CTX_RYW_ROUNDS", "30"))
GATED = "/api/organizations"


@pytest.fixture(scope="module")
def other():
    """Two workers; no auth limits, so that the rounds can sign in as often as they need."""
    with second_coachd(WORKERS=2, AUTH_RATE_LIMIT_POINTS=10 ** 6,
                       RATE_LIMITER_ENABLED="false") as base:
        yield base


def fresh(base, client, org=False):
    """A client for `base` on a connection of its own, holding `client`'s session (and its
    organization header unless org is given)."""
    c = Client(base_url=base)
    c.cookies.set(SESSION_COOKIE, client.session_token)
    h = client.headers.get("X-Organization-Id") if org is False else org
    if h:
        c.headers["X-Organization-Id"] = h
    return c


def warm(base, client, path="/api/users/me", times=6):
    """Requests on new connections: with two workers, both (almost surely) cache the context."""
    for _ in range(times):
        fresh(base, client).get(path)


def writer(i, base, client):
    """Round i's writer: on `base` (the two-worker server) or on the main server."""
    return fresh(base if i % 2 else BASE_URL, client)


def rounds(kind, one):
    """Runs `one(i)` ROUNDS times; each returns whether the very next request saw the change."""
    start = time.monotonic()
    stale = [i for i in range(ROUNDS) if not one(i)]
    print("\nryw %s: %d rounds, %d stale, %.1f s" % (kind, ROUNDS, len(stale),
                                                      time.monotonic() - start))
    assert not stale, "%s: %d of %d rounds served the old context (rounds %s)" % (
        kind, len(stale), ROUNDS, stale[:10])


def other_client(base):
    return Client(base_url=base)


def org_with(base, *roles):
    org = Org(make_platform_admin()[0], roles=("OrganizationAdmin",))
    for r in roles:
        org.add_member(r)
    return org


def me(c):
    return c.get_json("/api/users/me")["data"]


def test_sign_out(other):
    _, u = sign_up(client=other_client(other))

    def one(i):
        s, _ = sign_in(u["email"], client=other_client(other))
        warm(other, s)
        writer(i, other, s).post_json("/api/auth/sign-out", {})
        return fresh(other, s).get("/api/users/me").status_code == 401

    rounds("sign-out", one)


def test_password_change(other):
    c, u = sign_up(client=other_client(other))
    pw = [PASSWORD]

    def one(i):
        o, _ = sign_in(u["email"], password=pw[0], client=other_client(other))
        warm(other, o)
        new = "changed-password-%d" % i
        # The password limits count per account: always through the server without them.
        fresh(other, c).post_json("/api/users/me/password",
                                  {"currentPassword": pw[0], "newPassword": new})
        pw[0] = new
        return fresh(other, o).get("/api/users/me").status_code == 401

    rounds("password change", one)


def test_membership_role(other):
    org = org_with(other, "Teacher")
    t, admin = org.clients["Teacher"], org.clients["OrganizationAdmin"]
    path = "/api/organizations/%s/users/%s" % (org.id, org.uid("Teacher"))

    def one(i):
        role = "Manager" if i % 2 == 0 else "Teacher"
        warm(other, t)
        writer(i, other, admin).patch_json(path, {"roleInOrganization": role})
        return me(fresh(other, t))["role"] == role

    rounds("membership role", one)


def test_membership_disabled(other):
    org = org_with(other, "Teacher")
    t, admin = org.clients["Teacher"], org.clients["OrganizationAdmin"]
    path = "/api/organizations/%s/users/%s" % (org.id, org.uid("Teacher"))

    def one(i):
        disable = i % 2 == 0
        warm(other, t, "/api/mentorships")
        writer(i, other, admin).patch_json(
            path, {"membershipStatus": "disabled" if disable else "active"})
        got = fresh(other, t).get("/api/mentorships").status_code
        return got == (403 if disable else 200)

    rounds("membership disabled", one)


def test_user_status(other):
    org = org_with(other, "Teacher")
    t, admin = org.clients["Teacher"], org.clients["OrganizationAdmin"]
    path = "/api/users/%s" % org.uid("Teacher")

    def one(i):
        suspend = i % 2 == 0
        warm(other, t)
        writer(i, other, admin).patch_json(path, {"status": "suspended" if suspend else "active"})
        got = fresh(other, t).get("/api/users/me").status_code
        return got == (401 if suspend else 200)

    rounds("user status", one)


def test_verify_email(other, mail):
    def one(i):
        c, u = sign_up(email=unique_email("ryw.verify"), client=other_client(other))
        warm(other, c, "/api/auth/session")
        link = mail.wait_for(u["email"], subject="erif").link("verify-email")
        # The link names the public URL; the round's writer is one of the two servers.
        link = (other if i % 2 else BASE_URL) + link[link.index("/api/"):]
        r = Client(base_url=BASE_URL).get(link, allow_redirects=False)
        assert r.status_code == 302, (i, link, r.text)
        return fresh(other, c).get_json("/api/auth/session")["user"]["emailVerified"] is True

    rounds("verify-email", one)


def test_invite_accepted(other):
    org = org_with(other)
    admin = org.clients["OrganizationAdmin"]

    def one(i):
        c, u = sign_up(email=unique_email("ryw.invite"), client=other_client(other))
        inv = admin.post_json("/api/organizations/%s/invites" % org.id,
                              {"email": u["email"], "roleInOrganization": "Teacher"},
                              expect=201)["data"]
        warm(other, c, GATED)
        writer(i, other, c).post_json("/api/invites/%s/accept" % inv["id"], {})
        r = fresh(other, c).get(GATED)
        return not (r.status_code == 403 and r.json()["error"]["code"] == "INVITE_GATE")

    rounds("invite accepted", one)


def test_switch_organization(other):
    admin = make_platform_admin()[0]
    org1 = Org(admin, roles=())
    org2 = Org(admin, roles=())
    c, u = sign_up(client=other_client(other))
    org1.add_member("Teacher", user=(c, u))
    org2.add_member("Coach", user=(None, u))
    c.org(None)

    def one(i):
        to = org2 if i % 2 == 0 else org1
        warm(other, c)
        writer(i, other, c).post_json("/api/me/switch-organization", {"organizationId": to.id})
        d = me(fresh(other, c))
        return (d["currentOrganizationId"], d["orgId"]) == (to.id, to.id)

    rounds("switch organization", one)


def test_a_write_answered_while_redis_lags(other, mail):
    """Redis takes the invalidation late (a busy or descheduled server, here CLIENT PAUSE): the
    write must not be answered before the other workers applied it. (An invalidation that was
    only sent, not acknowledged, left the very next request to the old context.)"""
    for _ in range(3):
        c, u = sign_up(email=unique_email("ryw.lag"), client=other_client(other))
        warm(other, c, "/api/auth/session")
        link = mail.wait_for(u["email"], subject="erif").link("verify-email")
        redis_cli("CLIENT", "PAUSE", "300", "ALL")
        r = Client(base_url=other).get(other + link[link.index("/api/"):],
                                       allow_redirects=False)
        assert r.status_code == 302
        assert fresh(other, c).get_json("/api/auth/session")["user"]["emailVerified"] is True


def worker_of(r):
    """The answering worker: the first 8 hex digits of X-Request-Id are its pid."""
    return r.headers["X-Request-Id"][:8]


def names_by_worker(base, client, per_worker=2, tries=80):
    """firstName as each of the two workers answers it, `per_worker` fresh connections each
    (which worker takes a connection is the kernel's choice: tried until both have answered)."""
    seen = {}
    for _ in range(tries):
        r = fresh(base, client).get("/api/users/me")
        assert r.status_code == 200, r.text
        seen.setdefault(worker_of(r), []).append(r.json()["data"]["firstName"])
        if len(seen) == 2 and all(len(v) >= per_worker for v in seen.values()):
            return seen
    pytest.fail("%d connections did not reach both workers: %s" % (tries, seen))


def test_no_hit_without_a_fresh_heartbeat(other):
    """The lease: a worker that has not heard its own heartbeat back through Redis lately (so it
    may have missed an invalidation whose writer stopped waiting) reads the database.

    The setup needs both workers to hold the context and their leases at the moment of the
    unannounced change; a worker whose lease lapsed then (a descheduled process, as under ASan on
    a busy machine) rightly reads the database, and the setup is made again with another user.
    The property itself (no hit once the lease is gone) is asserted once, never retried."""
    setups = []
    for _ in range(4):
        c, u = sign_up(name="Lease Holder", client=other_client(other))
        names_by_worker(other, c)  # both workers cache the context
        # Not through helpers.psql, which announces its changes.
        r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DATABASE_URL],
                           input="UPDATE users SET first_name = 'Unannounced' WHERE id = '%s'" %
                           u["id"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        seen = names_by_worker(other, c)
        setups.append(seen)
        if all(set(v) == {"Lease"} for v in seen.values()):
            break  # cached in both: the change was not announced
    else:
        pytest.fail("no setup had both workers serving the cached context: %s" % setups)
    redis_cli("CLIENT", "PAUSE", "1500", "ALL")
    try:
        time.sleep(0.3)  # longer than the lease
        seen = names_by_worker(other, c, per_worker=1, tries=40)
    finally:
        redis_cli("CLIENT", "UNPAUSE")
    assert all(set(v) == {"Unannounced"} for v in seen.values()), seen
