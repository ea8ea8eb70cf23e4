"""Session notices: confirmation and cancellation mails to coach and teacher in their languages,
with the start in the recipient's time zone (else the session's); push notifications through
the outbox to the push sink in Expo format (batches of at most 100, DeviceNotRegistered drops
the token); and the missed-session sweeper."""
import datetime
import time
import uuid
from zoneinfo import ZoneInfo

import pytest

from helpers import PushBox, RedisSub, psql, psql_value, second_coachd, wait_until
from ment_fixtures import add_push_token, future, make_mentorship, make_session
from orgs import new_org
EN_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
EN_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
             "September", "October", "November", "December"]
ES_DAYS = ["lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"]
ES_MONTHS = ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
             "septiembre", "octubre", "noviembre", "diciembre"]


def start_text(when_iso, tz, lang):
    t = datetime.datetime.strptime(when_iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).astimezone(ZoneInfo(tz))
    if lang == "es":
        return "%s, %d de %s de %d, %02d:%02d (%s)" % (
            ES_DAYS[t.weekday()], t.day, ES_MONTHS[t.month - 1], t.year, t.hour, t.minute, tz)
    return "%s, %s %d, %d %02d:%02d (%s)" % (EN_DAYS[t.weekday()], EN_MONTHS[t.month - 1], t.day,
                                            t.year, t.hour, t.minute, tz)


@pytest.fixture
def org():
    o = new_org(roles=("Manager",))
    coach, _ = o.add_member("Coach", first="Carla", last="Coach", lang="es")
    coach.patch_json("/api/users/me", {"timezone": "Europe/Madrid"})
    o.add_member("Teacher", first="Tom", last="Teacher", lang="en")
    return o


def test_confirmation_and_cancellation_mails(org, mail):
    m = make_mentorship(org, title="Álgebra")
    when = "2031-07-04T16:30:00.000Z"
    s = make_session(org, m["id"], scheduledAt=when, durationMinutes=45,
                     timezone="America/New_York")["data"]
    coach = mail.wait_for(org.users["Coach"]["email"], subject="Sesión programada")
    assert coach.subject == "Sesión programada: “Álgebra”"
    assert start_text(when, "Europe/Madrid", "es") in coach.text  # the coach's own zone
    assert "viernes, 4 de julio de 2031, 18:30 (Europe/Madrid)" in coach.text
    assert "Carla Coach" in coach.text and "Tom Teacher" in coach.text and "45" in coach.text
    assert coach.html
    teacher = mail.wait_for(org.users["Teacher"]["email"], subject="Session scheduled")
    assert teacher.subject == "Session scheduled: “Álgebra”"
    # The teacher has no time zone: the session's is used.
    assert "Friday, July 4, 2031 12:30 (America/New_York)" in teacher.text
    org.client("Coach").delete_json("/api/sessions/%s" % s["id"])
    coach = mail.wait_for(org.users["Coach"]["email"], subject="Sesión cancelada")
    assert "viernes, 4 de julio de 2031, 18:30 (Europe/Madrid)" in coach.text
    teacher = mail.wait_for(org.users["Teacher"]["email"], subject="Session cancelled")
    assert "Friday, July 4, 2031 12:30 (America/New_York)" in teacher.text


def test_patch_to_cancelled_mails_and_other_patches_do_not(org, mail):
    m = make_mentorship(org)
    s = make_session(org, m["id"], scheduledAt=future(30))["data"]
    teacher = org.users["Teacher"]["email"]
    mail.wait_for(teacher, subject="Session scheduled")
    org.client("Teacher").patch_json("/api/sessions/%s" % s["id"], {"status": "confirmed"})
    org.client("Coach").patch_json("/api/sessions/%s" % s["id"], {"notes": "x"})
    org.client("Manager").patch_json("/api/sessions/%s" % s["id"], {"status": "cancelled"})
    got = mail.wait_for(teacher, subject="Session cancelled")
    assert "your mentorship" in got.text  # untitled mentorship
    time.sleep(0.5)
    assert len(mail.all_to(teacher)) == 2 + 1  # sign-up verification, scheduled, cancelled


def test_push_to_registered_tokens(org, push):
    m = make_mentorship(org, title="Bio")
    coach_tokens = [add_push_token(org.uid("Coach")) for _ in range(2)]
    teacher_token = add_push_token(org.uid("Teacher"), platform="android")
    gone = add_push_token(org.uid("Teacher"), "ExponentPushToken[unregistered-%s]" %
                          uuid.uuid4().hex)
    when = "2031-08-01T09:00:00.000Z"
    s = make_session(org, m["id"], scheduledAt=when, timezone="UTC")["data"]
    for tok in coach_tokens:
        msg = push.wait_for(tok)
        assert msg["title"] == "Sesión programada: “Bio”"
        assert msg["body"] == start_text(when, "Europe/Madrid", "es")
        assert msg["data"] == {"type": "session-scheduled", "sessionId": s["id"],
                               "mentorshipId": m["id"]}
    msg = push.wait_for(teacher_token)
    assert msg["title"] == "Session scheduled: “Bio”"
    assert msg["body"] == "Friday, August 1, 2031 09:00 (UTC)"
    # The Expo request: JSON array, one message per token, the headers of the Expo API.
    req = [r for r in PushBox().requests() if any(
        isinstance(x, dict) and x.get("to") == teacher_token for x in r["body"])][0]
    assert req["path"] == "/--/api/v2/push/send"
    assert req["headers"]["Content-Type"].startswith("application/json")
    assert "application/json" in req["headers"].get("Accept", "")
    assert isinstance(req["body"], list) and all(isinstance(x["to"], str) for x in req["body"])
    # DeviceNotRegistered forgets the token; the others stay.
    push.wait_for(gone)
    wait_until(lambda: psql_value("SELECT count(*) FROM push_tokens WHERE token = :'t'",
                                  t=gone) == "0", what="unregistered token removed")
    assert psql_value("SELECT count(*) FROM push_tokens WHERE user_id = :'u'",
                      u=org.uid("Teacher")) == "1"
    org.client("Coach").delete_json("/api/sessions/%s" % s["id"])
    msg = push.wait_for(teacher_token, count=2)
    assert msg["title"] == "Session cancelled: “Bio”"
    assert msg["data"]["type"] == "session-cancelled"


def test_push_batches_of_100(org, push):
    m = make_mentorship(org)
    tokens = ["ExponentPushToken[b%03d-%s]" % (i, uuid.uuid4().hex[:8]) for i in range(150)]
    psql("INSERT INTO push_tokens (token, user_id, platform) SELECT t, :'u', 'ios'"
         " FROM unnest(string_to_array(:'ts', ',')) t", u=org.uid("Teacher"), ts=",".join(tokens))
    make_session(org, m["id"], scheduledAt=future(60))
    for t in (tokens[0], tokens[99], tokens[100], tokens[149]):
        push.wait_for(t)
    batches = [r["body"] for r in PushBox().requests() if any(
        isinstance(x, dict) and x.get("to") in tokens for x in r["body"])]
    assert sorted(len(b) for b in batches) == [50, 100]


def test_no_tokens_no_push_rows(org):
    m = make_mentorship(org)
    s = make_session(org, m["id"], scheduledAt=future(90))["data"]
    assert psql_value("SELECT count(*) FROM outbox WHERE kind = 'push'"
                      " AND payload->'data'->>'sessionId' = :'s'", s=s["id"]) == "0"
    assert psql_value("SELECT count(*) FROM outbox WHERE kind = 'mail'"
                      " AND payload->>'to' IN (:'a', :'b') AND payload->>'subject' LIKE 'Se%'",
                      a=org.users["Coach"]["email"], b=org.users["Teacher"]["email"]) == "2"


def test_sweeper_marks_missed(org):
    m = make_mentorship(org)
    ids = {}
    rows = {"old": ("scheduled", 300, 60), "old_confirmed": ("confirmed", 180, 60),
            "recent": ("scheduled", 80, 60), "completed": ("completed", 500, 60),
            "cancelled": ("cancelled", 90, 60)}
    with RedisSub("mentorship:%s" % m["id"], "user:%s" % org.uid("Coach")) as sub:
        for key, (status, minutes_ago, duration) in rows.items():
            ids[key] = str(uuid.uuid4())
            psql("INSERT INTO mentorship_sessions (id, mentorship_id, organization_id,"
                 " scheduled_at, duration_minutes, status) VALUES (:'id', :'m', :'o',"
                 " now() - make_interval(mins => :mins), :d, :'st')",
                 id=ids[key], m=m["id"], o=org.id, mins=minutes_ago, d=duration, st=status)
        with second_coachd(SWEEPER_INTERVAL_SECONDS=1):
            def status(key):
                return psql_value("SELECT status FROM mentorship_sessions WHERE id = :'id'",
                                  id=ids[key])
            wait_until(lambda: status("old") == "missed", timeout=15, what="sweeper")
            assert status("old_confirmed") == "missed"
            assert status("recent") == "scheduled"  # ended 20 minutes ago: not yet
            assert status("completed") == "completed" and status("cancelled") == "cancelled"
            got = [sub.next("session-update", timeout=10) for _ in range(2)]
            assert all(e["data"] == {"action": "updated", "mentorshipId": m["id"]} for e in got)
            assert {e["channel"] for e in got} == {"mentorship:%s" % m["id"],
                                                  "user:%s" % org.uid("Coach")}
            # Once missed, nothing more happens on later runs.
            time.sleep(2.5)
            assert sub.drain(0.2) == []
