"""Sessions: create (roles, mentorship state, validation, the 15-minute rule and its race), list
per role with filters, get, PATCH (per-role field rules, transitions of docs/api.md), DELETE,
the session-update events, the video token (checked by the npm agora-token package) and call
reactions."""
import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import time

import pytest

from helpers import (Client, RedisSub, assert_error, psql, psql_value, second_coachd,
                     wait_until)
from ment_fixtures import future, iso, make_mentorship, make_session, platform_admin
from orgs import new_org

HERE = os.path.dirname(os.path.abspath(__file__))
STATUSES = ("scheduled", "confirmed", "completed", "cancelled", "missed")
ALLOWED = {("scheduled", t) for t in ("confirmed", "cancelled", "completed", "missed")} | \
    {("confirmed", t) for t in ("scheduled", "cancelled", "completed", "missed")}
APP_ID = "970ca35de60c44645bbae8a215061b33"
APP_CERT = "5cfd2fd1755d40ecb72977518be15d3b"
EMOJI = ["👍", "❤️", "😂", "🎉", "👏", "🙌"]


@pytest.fixture
def org():
    o = new_org()
    o.add_member("Coach", key="Coach2", first="Other")
    o.add_member("Teacher", key="Teacher2", first="Other")
    return o


@pytest.fixture
def ment(org):
    return make_mentorship(org, title="Physics")


def spath(s, suffix=""):
    return "/api/sessions/%s%s" % (s["id"], suffix)


def at(base, minutes):
    t = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc)
    return iso(t + datetime.timedelta(minutes=minutes))


# ---- create ------------------------------------------------------------------------------


def test_create_defaults_and_channel(org, ment):
    when = future(30)
    t0 = time.time()
    s = make_session(org, ment["id"], scheduledAt=when)["data"]
    assert s["status"] == "scheduled"
    assert s["scheduledAt"] == when
    assert (s["durationMinutes"], s["timezone"], s["notes"]) == (60, "UTC", None)
    assert s["mentorshipId"] == ment["id"]
    assert s["cancelledAt"] is None and s["cancelledBy"] is None and s["completedAt"] is None
    m = re.fullmatch(r"ms_([0-9a-f-]{36})_(\d+)", s["videoChannel"])
    assert m and m.group(1) == s["id"]
    assert abs(int(m.group(2)) / 1000 - t0) < 30
    created = datetime.datetime.strptime(s["createdAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc)
    assert int(m.group(2)) == int(created.timestamp() * 1000)
    assert s["mentorship"]["id"] == ment["id"] and s["mentorship"]["title"] == "Physics"
    assert s["coach"]["id"] == org.uid("Coach") and s["teacher"]["id"] == org.uid("Teacher")


def test_create_with_fields_and_offset_time(org, ment):
    s = make_session(org, ment["id"], scheduledAt="2031-05-01T10:30:00+02:00",
                     durationMinutes=15, timezone="America/Argentina/Buenos_Aires",
                     notes="Bring questions")["data"]
    assert s["scheduledAt"] == "2031-05-01T08:30:00.000Z"
    assert (s["durationMinutes"], s["timezone"], s["notes"]) == (
        15, "America/Argentina/Buenos_Aires", "Bring questions")
    s = make_session(org, ment["id"], scheduledAt="2031-05-02T10:00:00Z", durationMinutes=480)
    assert s["data"]["durationMinutes"] == 480


def test_create_roles(org, ment):
    body = {"mentorshipId": ment["id"], "scheduledAt": future(40)}
    assert_error(org.client("Teacher").post("/api/sessions", json=body), 403, "FORBIDDEN")
    assert_error(org.client("Coach2").post("/api/sessions", json=body), 403, "FORBIDDEN")
    for i, key in enumerate(("Manager", "OrganizationAdmin")):
        org.client(key).post_json("/api/sessions", dict(body, scheduledAt=future(50 + i * 5)),
                                  expect=201)
    pa, _ = platform_admin(org.id)
    pa.post_json("/api/sessions", dict(body, scheduledAt=future(70)), expect=201)
    other = new_org(roles=("Manager",))
    assert_error(other.client("Manager").post("/api/sessions", json=body), 403, "FORBIDDEN")
    body["mentorshipId"] = "00000000-0000-4000-8000-000000000000"
    assert_error(org.client("Manager").post("/api/sessions", json=body), 404, "NOT_FOUND")


@pytest.mark.parametrize("status", ["pending", "paused", "ended"])
def test_create_needs_active_mentorship(org, status):
    m = make_mentorship(org, status=status)
    r = org.client("Coach").post("/api/sessions", json={"mentorshipId": m["id"],
                                                        "scheduledAt": future()})
    assert_error(r, 422, "UNPROCESSABLE")


@pytest.mark.parametrize("field,value", [
    ("mentorshipId", None), ("mentorshipId", "nope"), ("scheduledAt", None),
    ("scheduledAt", "2020-01-01T10:00:00Z"), ("scheduledAt", "tomorrow"),
    ("scheduledAt", "2031-01-01T10:00:00"), ("scheduledAt", "2031-02-30T10:00:00Z"),
    ("durationMinutes", 14), ("durationMinutes", 481), ("durationMinutes", "60"),
    ("durationMinutes", 60.5), ("timezone", "Mars/Olympus"), ("timezone", "utc"),
    ("timezone", 3), ("notes", "x" * 2001),
])
def test_create_validation(org, ment, field, value):
    body = {"mentorshipId": ment["id"], "scheduledAt": future(90)}
    if value is None:
        body.pop(field)
    else:
        body[field] = value
    r = org.client("Coach").post("/api/sessions", json=body)
    err = assert_error(r, 400, "VALIDATION_ERROR")
    assert [d["field"] for d in err["details"]] == [field]


def test_spacing_rule(org, ment):
    base = future(200)  # a session base .. base+60
    make_session(org, ment["id"], scheduledAt=base)
    conflicts = [at(base, 74), at(base, 60), at(base, 30), at(base, 0), at(base, -74),
                 at(base, -60)]
    for when in conflicts:
        r = org.client("Coach").post("/api/sessions", json={"mentorshipId": ment["id"],
                                                            "scheduledAt": when})
        assert_error(r, 409, "SESSION_CONFLICT")
    # A 30-minute session must end 15 minutes before: at -45 it is fine, at -44 it is not.
    r = org.client("Coach").post("/api/sessions", json={
        "mentorshipId": ment["id"], "scheduledAt": at(base, -44), "durationMinutes": 30})
    assert_error(r, 409, "SESSION_CONFLICT")
    make_session(org, ment["id"], scheduledAt=at(base, -45), durationMinutes=30)
    make_session(org, ment["id"], scheduledAt=at(base, 75))  # 15 minutes after the end
    # Another mentorship is not affected; a cancelled session frees its slot.
    m2 = make_mentorship(org, teacher="Teacher2")
    make_session(org, m2["id"], scheduledAt=base)
    s = make_session(org, m2["id"], scheduledAt=at(base, 300))["data"]
    org.client("Coach").delete_json(spath(s))
    make_session(org, m2["id"], scheduledAt=at(base, 300))


def test_spacing_race_exactly_one_wins(org, ment):
    when = future(300)
    mine = org.client("Coach")
    clients = []
    for i in range(16):
        c = Client(source_ip=mine.ip)
        c.cookies.update(mine.cookies)
        c.org(org.id)
        clients.append((c, at(when, i)))  # all within 15 minutes of each other

    def create(arg):
        c, t = arg
        r = c.post("/api/sessions", json={"mentorshipId": ment["id"], "scheduledAt": t})
        return r.status_code, r.json()

    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        results = list(ex.map(create, clients))
    codes = [c for c, _ in results]
    assert codes.count(201) == 1, codes
    assert all(body["error"]["code"] == "SESSION_CONFLICT" for c, body in results if c == 409)
    assert codes.count(409) == 15, codes
    assert psql_value("SELECT count(*) FROM mentorship_sessions WHERE mentorship_id = :'m'"
                      " AND scheduled_at >= :'t'", m=ment["id"], t=when) == "1"



def lock_waiters():
    return int(psql_value("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                          " AND datname = current_database()"))


def meet_behind_a_row(ment, start, requests):
    """Runs the requests (callables) together while an uncommitted session of the mentorship,
    eight hours from start, sits in the spacing constraint: every request whose row reached the
    constraint waits for it. Once as many wait as the pool lets in, that row is rolled back, and
    the waiting rows meet each other's, all uncommitted. Returns the results in order and the
    seconds they took after the rollback."""
    holder = subprocess.Popen(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", os.environ["COACHD_DATABASE_URL"]],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        holder.stdin.write(
            "BEGIN;\n"
            "INSERT INTO mentorship_sessions (id, mentorship_id, organization_id, scheduled_at,"
            " duration_minutes) SELECT gen_random_uuid(), id, organization_id, '%s', 480"
            " FROM mentorships WHERE id = '%s';\n"
            "SELECT pg_sleep(30);\n" % (start, ment["id"]))
        holder.stdin.flush()
        wait_until(lambda: psql_value(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%'"
            " AND state = 'active' AND pid <> pg_backend_pid()") == "1", what="the held row")
        with concurrent.futures.ThreadPoolExecutor(len(requests)) as ex:
            futures = [ex.submit(r) for r in requests]
            # Waiting: the requests in PostgreSQL (on the held row, or on the mentorship's row
            # lock). Settled once the count holds still for half a second.
            last, since = -1, time.monotonic()
            while time.monotonic() - since < 0.5:
                n = lock_waiters()
                if n != last:
                    last, since = n, time.monotonic()
                time.sleep(0.05)
            assert last >= 2, "only %d requests waited in the database" % last
            psql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                 " WHERE query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()")
            t0 = time.monotonic()
            results = [f.result() for f in futures]
            elapsed = time.monotonic() - t0
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    return results, elapsed


def coach_clone(org):
    mine = org.client("Coach")
    c = Client(source_ip=mine.ip)
    c.cookies.update(mine.cookies)
    c.org(org.id)
    return c


def test_spacing_race_at_the_constraint_one_wins_the_rest_409(org, ment):
    """Sixteen creates within 15 minutes of each other meet in the spacing constraint, each
    row uncommitted. They held a shared lock on the mentorship, so each waited for another's
    row, and the deadlock detector failed all but one, a second apiece: 500s, seconds late."""
    when = future(400)

    def create(minutes):
        c = coach_clone(org)
        return lambda: c.post("/api/sessions", json={"mentorshipId": ment["id"],
                                                     "scheduledAt": at(when, minutes)})
    results, elapsed = meet_behind_a_row(ment, at(when, -60), [create(i) for i in range(16)])
    codes = [r.status_code for r in results]
    assert sorted(codes) == [201] + [409] * 15, codes
    assert all(r.json()["error"]["code"] == "SESSION_CONFLICT" for r in results
               if r.status_code == 409)
    assert elapsed < 5, "%.1f s after the rollback" % elapsed  # no deadlock-detector waits
    assert psql_value("SELECT count(*) FROM mentorship_sessions WHERE mentorship_id = :'m'"
                      " AND scheduled_at >= :'t'", m=ment["id"], t=at(when, -60)) == "1"


def test_reschedule_race_at_the_constraint_one_wins_the_rest_409(org, ment):
    """Eight sessions days apart are moved at once to times within 15 minutes of each other:
    one move wins, seven answer 409, none deadlocks."""
    base = future(500)
    sessions = [make_session(org, ment["id"], scheduledAt=at(base, 1440 * (i + 1)))["data"]
                for i in range(8)]

    def move(i, s):
        c = coach_clone(org)
        return lambda: c.patch(spath(s), json={"scheduledAt": at(base, i)})
    results, elapsed = meet_behind_a_row(ment, at(base, -60), [move(i, s) for i, s in
                                                                enumerate(sessions)])
    codes = [r.status_code for r in results]
    assert sorted(codes) == [200] + [409] * 7, codes
    assert elapsed < 5, "%.1f s after the rollback" % elapsed

# ---- list and get ------------------------------------------------------------------------


def test_list_per_role_and_filters(org, ment):
    m2 = make_mentorship(org, coach="Coach2", teacher="Teacher2")
    a = make_session(org, ment["id"], scheduledAt="2031-03-01T10:00:00Z")["data"]
    b = make_session(org, ment["id"], scheduledAt="2031-03-02T10:00:00Z")["data"]
    c = make_session(org, m2["id"], by="Coach2", scheduledAt="2031-03-01T12:00:00Z")["data"]
    org.client("Teacher").patch_json(spath(b), {"status": "confirmed"})
    other = new_org(roles=("Coach", "Teacher", "Manager"))
    make_session(other, make_mentorship(other)["id"], scheduledAt="2031-03-01T10:00:00Z")

    def listing(key, query=""):
        body = org.client(key).get_json("/api/sessions" + query)
        return [s["id"] for s in body["data"]], body["meta"]["total_count"]

    assert listing("Manager") == ([a["id"], c["id"], b["id"]], 3)  # by scheduledAt
    assert listing("OrganizationAdmin")[0] == [a["id"], c["id"], b["id"]]
    assert listing("Coach") == ([a["id"], b["id"]], 2)
    assert listing("Teacher") == ([a["id"], b["id"]], 2)
    assert listing("Coach2") == ([c["id"]], 1)
    assert listing("Teacher2") == ([c["id"]], 1)
    assert listing("Manager", "?status=confirmed") == ([b["id"]], 1)
    assert listing("Manager", "?mentorshipId=%s" % m2["id"]) == ([c["id"]], 1)
    assert listing("Coach", "?mentorshipId=%s" % m2["id"]) == ([], 0)
    assert listing("Manager", "?from=2031-03-01T11:00:00Z") == ([c["id"], b["id"]], 2)
    assert listing("Manager", "?to=2031-03-01T12:00:00Z") == ([a["id"], c["id"]], 2)  # inclusive
    assert listing("Manager", "?from=2031-03-01T10:00:00Z&to=2031-03-01T10:00:00Z") == (
        [a["id"]], 1)
    assert listing("Manager", "?from=2031-03-01T11:00:00%2B01:00&to=2031-03-02T00:00:00Z") == (
        [a["id"], c["id"]], 2)
    assert listing("Manager", "?limit=1&offset=1") == ([c["id"]], 3)
    item = org.client("Teacher").get_json("/api/sessions")["data"][0]
    assert item["mentorship"]["id"] == ment["id"] and item["mentorship"]["notes"] is None
    assert item["coach"]["email"] == org.users["Coach"]["email"]
    assert item["teacher"]["email"] == org.users["Teacher"]["email"]


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "offset=-1", "limit=x",
                                   "status=done", "mentorshipId=abc", "from=yesterday",
                                   "to=2031-13-01T00:00:00Z"])
def test_list_bad_query(org, query):
    assert_error(org.client("Manager").get("/api/sessions?" + query), 400, "VALIDATION_ERROR")


def test_get_rules(org, ment):
    s = make_session(org, ment["id"])["data"]
    for key in ("Coach", "Teacher", "Manager", "OrganizationAdmin"):
        got = org.client(key).get_json(spath(s))["data"]
        assert got["id"] == s["id"] and got["mentorship"]["id"] == ment["id"]
        assert got["coach"]["id"] == org.uid("Coach")
        assert got["teacher"]["id"] == org.uid("Teacher")
    pa, _ = platform_admin(org.id)
    pa.get_json(spath(s))
    for key in ("Coach2", "Teacher2"):
        assert_error(org.client(key).get(spath(s)), 403, "FORBIDDEN")
    other = new_org(roles=("Manager",))
    assert_error(other.client("Manager").get(spath(s)), 403, "FORBIDDEN")
    assert_error(org.client("Manager").get("/api/sessions/00000000-0000-4000-8000-000000000000"),
                 404, "NOT_FOUND")
    assert_error(org.client("Manager").get("/api/sessions/123"), 400)


# ---- patch and delete --------------------------------------------------------------------


def test_teacher_patch_rules(org, ment):
    s = make_session(org, ment["id"])["data"]
    t = org.client("Teacher")
    for body in ({"status": "cancelled"}, {"status": "completed"}, {"notes": "x"},
                 {"scheduledAt": future(400)}, {"status": "confirmed", "notes": "x"},
                 {"durationMinutes": 30}, {"timezone": "UTC"}):
        assert_error(t.patch(spath(s), json=body), 403, "FORBIDDEN")
    assert_error(org.client("Teacher2").patch(spath(s), json={"status": "confirmed"}), 403)
    got = t.patch_json(spath(s), {"status": "confirmed"})["data"]
    assert got["status"] == "confirmed"
    assert t.patch_json(spath(s), {"status": "confirmed"})["data"]["updatedAt"] == got["updatedAt"]


def test_coach_patch_rules(org, ment):
    s = make_session(org, ment["id"], scheduledAt=future(500))["data"]
    c = org.client("Coach")
    assert_error(c.patch(spath(s), json={"status": "confirmed"}), 403, "FORBIDDEN")
    assert_error(org.client("Coach2").patch(spath(s), json={"notes": "x"}), 403, "FORBIDDEN")
    when = future(520)
    got = c.patch_json(spath(s), {"scheduledAt": when, "durationMinutes": 45,
                                  "timezone": "Asia/Tokyo", "notes": "n"})["data"]
    assert (got["scheduledAt"], got["durationMinutes"], got["timezone"], got["notes"]) == (
        when, 45, "Asia/Tokyo", "n")
    assert c.patch_json(spath(s), {"notes": None})["data"]["notes"] is None
    for body in ({"scheduledAt": "2020-01-01T00:00:00Z"}, {"durationMinutes": 10},
                 {"timezone": "Nowhere/City"}, {"status": "unknown"}, {"status": None},
                 {"scheduledAt": None}, {"notes": "x" * 2001}):
        assert_error(c.patch(spath(s), json=body), 400, "VALIDATION_ERROR")
    # Manager: everything, confirmed included.
    got = org.client("Manager").patch_json(spath(s), {"status": "confirmed"})["data"]
    assert got["status"] == "confirmed"
    got = c.patch_json(spath(s), {"status": "completed"})["data"]
    assert got["status"] == "completed" and got["completedAt"] is not None
    # A final session cannot be rescheduled; notes stay editable.
    assert_error(c.patch(spath(s), json={"scheduledAt": future(600)}), 422, "INVALID_TRANSITION")
    c.patch_json(spath(s), {"notes": "went well"})
    r = org.client("Manager").patch("/api/sessions/00000000-0000-4000-8000-000000000000",
                                    json={"notes": "x"})
    assert_error(r, 404, "NOT_FOUND")
    other = new_org(roles=("Manager",))
    assert_error(other.client("Manager").patch(spath(s), json={"notes": "x"}), 403)


def test_reschedule_into_conflict(org, ment):
    a = make_session(org, ment["id"], scheduledAt=future(700))["data"]
    b = make_session(org, ment["id"], scheduledAt=future(702))["data"]
    r = org.client("Coach").patch(spath(b), json={"scheduledAt": at(a["scheduledAt"], 70)})
    assert_error(r, 409, "SESSION_CONFLICT")
    r = org.client("Coach").patch(spath(a), json={"durationMinutes": 480})
    assert_error(r, 409, "SESSION_CONFLICT")
    org.client("Coach").patch_json(spath(b), {"scheduledAt": at(a["scheduledAt"], 75)})


def test_session_transition_table(org, ment):
    s = make_session(org, ment["id"], scheduledAt=future(800))["data"]
    for frm in STATUSES:
        for to in STATUSES:
            psql("UPDATE mentorship_sessions SET status = :'s', cancelled_at = NULL,"
                 " completed_at = NULL WHERE id = :'id'", s=frm, id=s["id"])
            r, body = org.client("Manager").call("PATCH", spath(s), {"status": to})
            if frm == to or (frm, to) in ALLOWED:
                assert r.status_code == 200, (frm, to, r.text)
                d = body["data"]
                assert d["status"] == to
                if frm != to:
                    assert (d["cancelledAt"] is not None) == (to == "cancelled"), (frm, to)
                    assert (d["completedAt"] is not None) == (to == "completed"), (frm, to)
                if to == "cancelled" and frm != to:
                    assert d["cancelledBy"] == org.uid("Manager")
            else:
                assert_error(r, 422, "INVALID_TRANSITION")
                assert psql_value("SELECT status FROM mentorship_sessions WHERE id = :'id'",
                                  id=s["id"]) == frm


def test_delete_rules(org, ment):
    s = make_session(org, ment["id"], scheduledAt=future(900))["data"]
    assert_error(org.client("Teacher").delete(spath(s)), 403, "FORBIDDEN")
    assert_error(org.client("Coach2").delete(spath(s)), 403, "FORBIDDEN")
    got = org.client("Coach").delete_json(spath(s))["data"]
    assert got["status"] == "cancelled" and got["cancelledBy"] == org.uid("Coach")
    assert got["cancelledAt"] is not None and got["mentorship"]["id"] == ment["id"]
    again = org.client("Coach").delete_json(spath(s))["data"]
    assert again["cancelledAt"] == got["cancelledAt"]
    for final in ("completed", "missed"):
        x = make_session(org, ment["id"], scheduledAt=future(920 + len(final)))["data"]
        psql("UPDATE mentorship_sessions SET status = :'s' WHERE id = :'id'", s=final, id=x["id"])
        assert_error(org.client("Manager").delete(spath(x)), 422, "INVALID_TRANSITION")
    y = make_session(org, ment["id"], scheduledAt=future(940))["data"]
    org.client("Teacher").patch_json(spath(y), {"status": "confirmed"})
    assert org.client("OrganizationAdmin").delete_json(spath(y))["data"]["status"] == "cancelled"
    assert_error(org.client("Manager").delete("/api/sessions/00000000-0000-4000-8000-000000000000"),
                 404)
    other = new_org(roles=("Manager",))
    assert_error(other.client("Manager").delete(spath(s)), 403)


# ---- events ------------------------------------------------------------------------------


def test_session_update_events(org, ment):
    chans = ["mentorship:%s" % ment["id"], "user:%s" % org.uid("Coach"),
             "user:%s" % org.uid("Teacher")]
    expected = {"action": "updated", "mentorshipId": ment["id"]}
    with RedisSub(*chans) as sub:
        s = make_session(org, ment["id"], scheduledAt=future(1000))["data"]
        got = [sub.next("session-update") for _ in range(3)]
        assert sorted(e["channel"] for e in got) == sorted(chans)
        assert all(e["data"] == expected and e["id"] for e in got)
        assert len({e["id"] for e in got}) == 1  # one event id on every channel
        org.client("Teacher").patch_json(spath(s), {"status": "confirmed"})
        assert sorted(sub.next("session-update")["channel"] for _ in range(3)) == sorted(chans)
        org.client("Coach").delete_json(spath(s))
        assert sorted(sub.next("session-update")["channel"] for _ in range(3)) == sorted(chans)
        # Failed writes publish nothing.
        org.client("Coach").patch(spath(s), json={"status": "scheduled"})
        assert sub.drain(0.7) == []


# ---- video token -------------------------------------------------------------------------


def verify_token(token):
    assert os.path.isdir(os.path.join(HERE, "node_modules", "agora-token")), \
        "run `npm ci` in tests/api first (scripts/test does)"
    out = subprocess.run(["node", os.path.join(HERE, "verify_agora_token.js"), token, APP_CERT],
                         capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def test_video_token_verified_independently(org, ment):
    s = make_session(org, ment["id"], scheduledAt=future(1100))["data"]
    for key in ("Coach", "Teacher", "Manager", "OrganizationAdmin"):
        t0 = int(time.time())
        d = org.client(key).get_json(spath(s, "/video-token"))["data"]
        assert set(d) == {"token", "channel", "appId", "uid", "expiresAt"}
        assert d["channel"] == s["videoChannel"] and d["appId"] == APP_ID
        assert d["token"].startswith("007")
        assert isinstance(d["uid"], int) and 0 < d["uid"] < 2 ** 31
        v = verify_token(d["token"])
        assert v["parsed"] and v["signatureValid"] is True
        assert v["signatureValidWithWrongCert"] is False
        assert v["appId"] == APP_ID
        assert abs(v["issueTs"] - t0) <= 5 and v["expire"] == 3600
        assert 1 <= v["salt"] <= 99999999
        assert len(v["services"]) == 1
        rtc = v["services"][0]
        assert rtc["type"] == 1 and rtc["channel"] == s["videoChannel"]
        assert rtc["uid"] == str(d["uid"])
        assert rtc["privileges"] == {"1": 3600, "2": 3600, "3": 3600, "4": 3600}
        expires = datetime.datetime.strptime(d["expiresAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        assert expires == v["issueTs"] + 3600
    # The uid is stable per user and differs between users.
    u1 = org.client("Coach").get_json(spath(s, "/video-token"))["data"]["uid"]
    u2 = org.client("Coach").get_json(spath(s, "/video-token"))["data"]["uid"]
    u3 = org.client("Teacher").get_json(spath(s, "/video-token"))["data"]["uid"]
    assert u1 == u2 != u3
    pa, _ = platform_admin(org.id)
    pa.get_json(spath(s, "/video-token"))


def test_video_token_rules(org, ment):
    s = make_session(org, ment["id"], scheduledAt=future(1150))["data"]
    for key in ("Coach2", "Teacher2"):
        assert_error(org.client(key).get(spath(s, "/video-token")), 403, "FORBIDDEN")
    other = new_org(roles=("Manager",))
    assert_error(other.client("Manager").get(spath(s, "/video-token")), 403)
    assert_error(org.client("Coach").get(
        "/api/sessions/00000000-0000-4000-8000-000000000000/video-token"), 404)
    psql("UPDATE mentorship_sessions SET video_channel = NULL WHERE id = :'id'", id=s["id"])
    assert_error(org.client("Coach").get(spath(s, "/video-token")), 422, "UNPROCESSABLE")


def test_video_token_unavailable_without_credentials(org, ment):
    s = make_session(org, ment["id"], scheduledAt=future(1170))["data"]
    with second_coachd(VIDEO_APP_ID=None, VIDEO_APP_CERTIFICATE=None) as base:
        c = Client(base_url=base, org_id=org.id)
        c.cookies.update(org.client("Coach").cookies)
        c.get_json(spath(s))  # the server works, only video is not configured
        r = c.get(spath(s, "/video-token"))
        err = assert_error(r, 503, "UNAVAILABLE")
        assert err["message"] == ("Video is not configured: set VIDEO_APP_ID and "
                                  "VIDEO_APP_CERTIFICATE"), err


# ---- reactions ---------------------------------------------------------------------------


def test_reactions(org, ment):
    s = make_session(org, ment["id"], scheduledAt=future(1200))["data"]
    with RedisSub("mentorship:%s" % ment["id"], "user:%s" % org.uid("Teacher")) as sub:
        for emoji in EMOJI:
            d = org.client("Teacher").post_json(spath(s, "/reactions"), {"emoji": emoji})["data"]
            assert d == {"emoji": emoji, "userId": org.uid("Teacher"), "sessionId": s["id"]}
            ev = sub.next("call-reaction")
            assert ev["channel"] == "mentorship:%s" % ment["id"]
            assert ev["data"] == {"emoji": emoji, "userId": org.uid("Teacher"),
                                  "sessionId": s["id"]}
        # The heart without its variation selector is published in the canonical form.
        d = org.client("Coach").post_json(spath(s, "/reactions"), {"emoji": "\u2764"})["data"]
        assert d["emoji"] == "\u2764\ufe0f"
        ev = sub.next("call-reaction")
        assert ev["data"]["emoji"] == "\u2764\ufe0f" and ev["data"]["userId"] == org.uid("Coach")
        org.client("Manager").post_json(spath(s, "/reactions"), {"emoji": "🎉"})
        sub.next("call-reaction")
        # Reactions never go to the user streams.
        assert [e for e in sub.drain(0.5) if e["channel"].startswith("user:")] == []
        for bad in ("👎", "", "👍👍", " 👍", "heart", 5, None, ["👍"], "👍\ufe0f", "👍🏽"):
            body = {} if bad is None else {"emoji": bad}
            r = org.client("Teacher").post(spath(s, "/reactions"), json=body)
            err = assert_error(r, 400, "VALIDATION_ERROR")
            assert err["details"][0]["field"] == "emoji"
        assert sub.drain(0.5) == []
    r = org.client("Teacher").post("/api/sessions/00000000-0000-4000-8000-000000000000/reactions",
                                   json={"emoji": "👍"})
    assert_error(r, 404, "NOT_FOUND")
    assert_error(org.client("Teacher2").post(spath(s, "/reactions"), json={"emoji": "👍"}), 403)
