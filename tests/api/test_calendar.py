"""Calendars: the iCalendar invitations attached to the session mails (REQUEST / CANCEL, one UID
per session, SEQUENCE increasing) and the personal calendar feed (create, rotate, revoke, ETag,
who sees what). Every .ics is parsed by an independent library, Debian's python3-icalendar; the
invitations and feeds of a session's life are parsed by ical.js too (ical_parse.mjs), the parser
of Thunderbird's calendar and of many web calendars."""
import datetime
import json
import os
import subprocess
import tempfile
from urllib.parse import urlsplit

import pytest
from icalendar import Calendar, vDuration

from helpers import BASE_URL, Client, artifacts_dir, psql
from ment_fixtures import future, make_mentorship, make_session
from orgs import new_org

# `,;\` and a line break in the title and the notes; multibyte text long enough to fold.
TITLE = 'Plan, review; A\\B "quoted"'
NOTES = "First line, with; semicolons\\ and\nsecond line: " + "ñandú € 😀 " * 12


def utc(iso):
    return datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc)


def check_raw(raw, folded):
    """RFC 5545 3.1: CRLF lines of at most 75 octets, no UTF-8 sequence split by a fold."""
    assert raw.endswith(b"\r\n")
    lines = raw[:-2].split(b"\r\n")
    for i, line in enumerate(lines):
        assert b"\n" not in line and b"\r" not in line
        assert len(line) <= 75, line
        line.decode("utf-8")  # a split sequence would not decode
        if i and line[:1] == b" ":
            assert (line[1] & 0xC0) != 0x80 if len(line) > 1 else True
    if folded:  # the notes are long enough to fold, at a multibyte character or not
        assert any(line[:1] == b" " for line in lines)


def parse(raw, folded=False):
    check_raw(raw, folded)
    return Calendar.from_ical(raw)


def events(cal):
    return {str(e["UID"]): e for e in cal.walk("VEVENT")}


def invitation(mail):
    """The text/calendar part of a mail: (method parameter, raw bytes)."""
    for part in mail.msg.walk():
        if part.get_content_type() == "text/calendar":
            assert part.get_content_disposition() == "attachment"
            assert part.get_param("charset").lower() == "utf-8"
            return part.get_param("method"), part.get_payload(decode=True)
    raise AssertionError("no text/calendar part in %s" % mail.subject)


def icaljs(raw):
    """(METHOD, {uid: event}) as ical.js reads raw (ical_parse.mjs)."""
    with tempfile.NamedTemporaryFile(suffix=".ics") as f:
        f.write(raw)
        f.flush()
        out = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "ical_parse.mjs"),
                              f.name], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    return data["method"], {e["uid"]: e for e in data["events"]}


def check_icaljs(raw, method, uid, org, start, minutes, sequence, summary, cancelled=False):
    """What a calendar app built on ical.js takes from raw: every field of the session's event,
    the TEXT values unescaped to exactly what was stored."""
    got_method, evs = icaljs(raw)
    assert got_method == method
    ev = evs[uid]
    assert ev["sequence"] == sequence
    assert ev["status"] == ("CANCELLED" if cancelled else "CONFIRMED")
    assert ev["start"] == start
    assert utc(ev["end"]) == utc(start) + datetime.timedelta(minutes=minutes)
    assert ev["summary"] == summary
    assert NOTES + "\n" in ev["description"]
    assert ev["url"] == ev["location"] and ev["url"].endswith("/sessions/" + uid.split("@")[0])
    assert ev["organizer"] == {"value": "mailto:" + org.users["Coach"]["email"],
                               "cn": "Carla Coach"}
    assert ev["attendee"] == {"value": "mailto:" + org.users["Teacher"]["email"],
                              "cn": "Tom Teacher"}
    return evs


def check_event(ev, session, org, start, minutes):
    assert str(ev["UID"]) == "%s@coachd" % session["id"]
    assert ev.decoded("DTSTART") == utc(start)
    assert ev.decoded("DTEND") == utc(start) + datetime.timedelta(minutes=minutes)
    assert str(ev["ORGANIZER"]).lower() == "mailto:" + org.users["Coach"]["email"].lower()
    assert str(ev["ATTENDEE"]).lower() == "mailto:" + org.users["Teacher"]["email"].lower()
    assert ev["ORGANIZER"].params["CN"] == "Carla Coach"
    assert TITLE in str(ev["SUMMARY"])
    assert NOTES in str(ev["DESCRIPTION"])
    assert str(ev["URL"]).endswith("/sessions/%s" % session["id"])
    assert str(ev["LOCATION"]) == str(ev["URL"])
    assert str(ev["X-COACHD-TIMEZONE"]) == "America/New_York"


@pytest.fixture
def org():
    o = new_org(roles=("Manager",))
    o.add_member("Coach", first="Carla", last="Coach", lang="es")
    o.add_member("Teacher", first="Tom", last="Teacher", lang="en")
    return o


def new_feed(client):
    r, data = client.call("POST", "/api/users/me/calendar-feed", expect=201)
    feed = data["data"]
    url = urlsplit(feed["url"])
    assert url.path.startswith("/api/calendar/") and url.path.endswith(".ics")
    assert feed["webcalUrl"] == "webcal://" + feed["url"].split("://", 1)[1]
    return BASE_URL + url.path  # PUBLIC_URL's host may be another name of this server


def fetch(url, expect=200, **headers):
    r = Client(org_id=None).request("GET", url, headers=headers)  # no cookie
    assert r.status_code == expect, r.text[:500]
    return r


def test_invitations_and_feed_follow_a_session(org, mail):
    """Scheduled, moved and cancelled through the API: the invitations carry one UID, an
    increasing SEQUENCE and the session's times; the teacher's feed shows it, moves it and
    marks it cancelled."""
    feed = new_feed(org.client("Teacher"))
    m = make_mentorship(org, title=TITLE)
    start = future(48)
    s = make_session(org, m["id"], scheduledAt=start, durationMinutes=45,
                     timezone="America/New_York", notes=NOTES)["data"]
    uid = "%s@coachd" % s["id"]
    coach, teacher = org.users["Coach"]["email"], org.users["Teacher"]["email"]

    # Scheduled: REQUEST, SEQUENCE 0, in each recipient's language.
    for who, subject in ((coach, "Sesión programada"), (teacher, "Session scheduled")):
        method, raw = invitation(mail.wait_for(who, subject=subject))
        assert method == "REQUEST"
        cal = parse(raw, True)
        assert str(cal["METHOD"]) == "REQUEST"
        ev = events(cal)[uid]
        assert int(ev["SEQUENCE"]) == 0 and str(ev["STATUS"]) == "CONFIRMED"
        check_event(ev, s, org, start, 45)
        assert ("Duración" if who == coach else "Duration") in str(ev["DESCRIPTION"])
        check_icaljs(raw, "REQUEST", uid, org, start, 45, 0, TITLE)
    raw = fetch(feed).content
    ev = events(parse(raw, True))[uid]
    check_event(ev, s, org, start, 45)
    assert int(ev["SEQUENCE"]) == 0 and str(ev["STATUS"]) == "CONFIRMED"
    check_icaljs(raw, None, uid, org, start, 45, 0, TITLE)

    # Examples to look at: the teacher's first invitation, and the feed (its token is in no body).
    with open(os.path.join(artifacts_dir(), "calendar-invitation.ics"), "wb") as f:
        f.write(invitation(mail.wait_for(teacher, subject="Session scheduled"))[1])
    with open(os.path.join(artifacts_dir(), "calendar-feed.ics"), "wb") as f:
        f.write(fetch(feed).content)

    # Moved: REQUEST again, same UID, SEQUENCE 1, the new times.
    moved = future(72)
    org.client("Coach").patch_json("/api/sessions/%s" % s["id"],
                                   {"scheduledAt": moved, "durationMinutes": 30})
    for who, subject in ((coach, "Sesión modificada"), (teacher, "Session changed")):
        method, raw = invitation(mail.wait_for(who, subject=subject))
        assert method == "REQUEST"
        ev = events(parse(raw, True))[uid]
        assert int(ev["SEQUENCE"]) == 1
        check_event(ev, s, org, moved, 30)
        check_icaljs(raw, "REQUEST", uid, org, moved, 30, 1, TITLE)
    raw = fetch(feed).content
    ev = events(parse(raw, True))[uid]
    assert int(ev["SEQUENCE"]) == 1 and ev.decoded("DTSTART") == utc(moved)
    check_icaljs(raw, None, uid, org, moved, 30, 1, TITLE)

    # Cancelled: CANCEL, SEQUENCE 2, STATUS:CANCELLED; the feed keeps it, cancelled.
    org.client("Coach").delete_json("/api/sessions/%s" % s["id"])
    for who, subject in ((coach, "Sesión cancelada"), (teacher, "Session cancelled")):
        method, raw = invitation(mail.wait_for(who, subject=subject))
        assert method == "CANCEL"
        cal = parse(raw, True)
        assert str(cal["METHOD"]) == "CANCEL"
        ev = events(cal)[uid]
        assert int(ev["SEQUENCE"]) == 2 and str(ev["STATUS"]) == "CANCELLED"
        check_event(ev, s, org, moved, 30)
        check_icaljs(raw, "CANCEL", uid, org, moved, 30, 2,
                     ("Cancelada: " if who == coach else "Cancelled: ") + TITLE, cancelled=True)
    raw = fetch(feed).content
    ev = events(parse(raw, True))[uid]
    assert int(ev["SEQUENCE"]) == 2 and str(ev["STATUS"]) == "CANCELLED"
    check_icaljs(raw, None, uid, org, moved, 30, 2, "Cancelled: " + TITLE, cancelled=True)
    # A calendar built from the feed: the session is no longer an appointment.
    busy = [e for e in parse(fetch(feed).content).walk("VEVENT")
            if str(e["STATUS"]) != "CANCELLED"]
    assert uid not in [str(e["UID"]) for e in busy]
    # Examples of the end: the teacher's cancellation, and the feed with the session cancelled.
    with open(os.path.join(artifacts_dir(), "calendar-cancel.ics"), "wb") as f:
        f.write(invitation(mail.wait_for(teacher, subject="Session cancelled"))[1])
    with open(os.path.join(artifacts_dir(), "calendar-feed-cancelled.ics"), "wb") as f:
        f.write(raw)


def test_feed_rotation_revocation_and_etag(org):
    teacher = org.client("Teacher")
    old = new_feed(teacher)
    new = new_feed(teacher)  # rotated: the old URL stops
    fetch(old, 404)
    r = fetch(new)
    assert r.headers["Content-Type"].startswith("text/calendar")
    assert r.headers["Cache-Control"] == "private, no-cache"
    cal = parse(r.content)
    # RFC 7986 REFRESH-INTERVAL (a DURATION value) and its older X- form: the 60-minute default.
    assert cal["REFRESH-INTERVAL"].params["VALUE"] == "DURATION"
    for name in ("REFRESH-INTERVAL", "X-PUBLISHED-TTL"):
        assert vDuration.from_ical(str(cal[name])) == datetime.timedelta(hours=1)
    etag = r.headers["ETag"]
    assert fetch(new, 304, **{"If-None-Match": etag}).content == b""
    assert fetch(new, 304, **{"If-None-Match": '"x", W/' + etag}).headers["ETag"] == etag
    # A new session changes the feed, so the old tag gets the whole feed again.
    m = make_mentorship(org)
    make_session(org, m["id"])
    r = fetch(new, 200, **{"If-None-Match": etag})
    assert r.headers["ETag"] != etag and len(events(parse(r.content))) == 1
    # Without .ics, or not a token: 400; a well-formed unknown token: 404.
    fetch(new[:-4], 400)
    fetch(BASE_URL + "/api/calendar/short.ics", 400)
    fetch(BASE_URL + "/api/calendar/" + "A" * 43 + ".ics", 404)
    # Revoked: 404; revoking again: 404.
    teacher.call("DELETE", "/api/users/me/calendar-feed", expect=204)
    fetch(new, 404)
    teacher.call("DELETE", "/api/users/me/calendar-feed", expect=404)
    # Other methods (calendar apps that speak CalDAV try OPTIONS and PROPFIND) and a path below
    # it match no route: the token is still left out of the log.
    anon = Client(org_id=None)
    for method, url in (("OPTIONS", new), ("PROPFIND", new), ("PUT", new), ("GET", new + "/x")):
        assert anon.request(method, url, openapi_loose=True).status_code in (204, 404, 405)
    # The token never reaches the log.
    log = os.environ.get("COACHD_LOG_FILE")
    if log:
        with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for url in (old, new):
            assert url.rsplit("/", 1)[1][:-4] not in text


def test_feed_shows_only_the_owners_sessions(org):
    other = new_org(roles=("Manager",))
    other.add_member("Coach")
    other.add_member("Teacher")
    m = make_mentorship(org)
    mine = make_session(org, m["id"])["data"]
    theirs = make_session(other, make_mentorship(other)["id"])["data"]
    # Another teacher's session in the same organization, with the same coach.
    org.add_member("Teacher", key="Teacher2")
    neighbour = make_session(org, make_mentorship(org, teacher="Teacher2")["id"],
                             scheduledAt=future(30))["data"]
    # A session far outside the window is left out (the window is 30 days back, 365 ahead).
    far = make_session(org, m["id"], scheduledAt=future(24 * 400))["data"]
    feed = new_feed(org.client("Teacher"))
    coach_feed = new_feed(org.client("Coach"))
    got = events(parse(fetch(feed).content))
    assert "%s@coachd" % mine["id"] in got
    assert "%s@coachd" % theirs["id"] not in got
    assert "%s@coachd" % neighbour["id"] not in got
    assert "%s@coachd" % far["id"] not in got
    assert len(got) == 1
    assert set(events(parse(fetch(coach_feed).content))) == {
        "%s@coachd" % mine["id"], "%s@coachd" % neighbour["id"]}
    # A removed member's sessions leave their feed; a disabled account's feed is empty.
    org.admin.delete_json("/api/organizations/%s/users/%s" % (org.id, org.uid("Teacher")))
    assert events(parse(fetch(feed).content)) == {}
    assert "%s@coachd" % mine["id"] in events(parse(fetch(coach_feed).content))
    psql("UPDATE users SET status = 'suspended' WHERE id = :'u'", u=org.uid("Coach"))
    assert events(parse(fetch(coach_feed).content)) == {}


def test_unknown_tokens_never_lock_out_a_valid_feed(org):
    """A calendar service fetches many users' feeds from one address and keeps polling rotated
    URLs: only the misses count against the address's auth limit, and a valid token is served
    past it."""
    points = int(os.environ.get("AUTH_RATE_LIMIT_POINTS", "10"))
    assert 0 < points <= 50
    url = new_feed(org.client("Teacher"))
    service = Client(org_id=None)  # one address of its own for every request below
    def get(u):
        return service.request("GET", u)
    assert get(url).status_code == 200
    unknown = [BASE_URL + "/api/calendar/%043d.ics" % i for i in range(points + 1)]
    assert [get(u).status_code for u in unknown] == [404] * points + [429]
    for _ in range(3):
        assert get(url).status_code == 200


def test_token_with_characters_after_it_stays_out_of_the_log(org):
    """A feed URL sent with something stuck to the token (a stray character pasted along, a
    bad percent-escape, a space) matches no route or fails to parse, and is logged as it came:
    the token is still left out, whatever the method."""
    import socket
    url = new_feed(org.client("Teacher"))
    tok = url.rsplit("/", 1)[1][:-4]
    host, port = urlsplit(BASE_URL).hostname, urlsplit(BASE_URL).port
    paths = ["/api/calendar/%s%%" % tok, "/api/calendar/%s+x" % tok,
             "/api/calendar/%s%%20.ics" % tok, "/api/calendar/%s~.ics/x" % tok,
             "/api/calendar/%s%%00.ics" % tok, "/api/calendar/x%s" % tok,
             "/api/calendar/%s.%s.ics/x" % (tok[:10], tok[10:])]
    for path in paths:
        for method in ("GET", "OPTIONS", "PROPFIND"):
            with socket.create_connection((host, port)) as s:  # sent as is, no client quoting
                s.sendall(("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                           % (method, path)).encode())
                while s.recv(65536):
                    pass
    log = os.environ.get("COACHD_LOG_FILE")
    if log:
        with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read()
        assert tok[10:] not in text
        assert "/api/calendar/[redacted]" in text


def test_cancelling_and_moving_at_once_invites_with_the_stored_times(org, mail):
    """A PATCH may cancel and move a session together: the CANCEL carries the times the session
    is stored with, which the feed shows under the same SEQUENCE (RFC 5545: one SEQUENCE, one
    DTSTART)."""
    feed = new_feed(org.client("Teacher"))
    m = make_mentorship(org)
    s = make_session(org, m["id"], scheduledAt=future(48), durationMinutes=30)["data"]
    moved = future(96)
    org.client("Coach").patch_json("/api/sessions/%s" % s["id"],
                                   {"status": "cancelled", "scheduledAt": moved,
                                    "durationMinutes": 45})
    uid = "%s@coachd" % s["id"]
    method, raw = invitation(mail.wait_for(org.users["Teacher"]["email"],
                                           subject="Session cancelled"))
    assert method == "CANCEL"
    sent = events(parse(raw))[uid]
    shown = events(parse(fetch(feed).content))[uid]
    assert int(sent["SEQUENCE"]) == int(shown["SEQUENCE"]) == 1
    assert str(shown["STATUS"]) == "CANCELLED"
    assert shown.decoded("DTSTART") == utc(moved)
    assert sent.decoded("DTSTART") == shown.decoded("DTSTART")
    assert sent.decoded("DTEND") == shown.decoded("DTEND")


def test_past_its_cap_the_feed_keeps_the_coming_sessions(org):
    """At most 5000 sessions: the coming ones first, then the latest past ones (before, the
    earliest 5000 of the window, so a busy coach's later sessions fell out of the feed)."""
    m = make_mentorship(org)
    psql("""
        INSERT INTO mentorship_sessions (id, mentorship_id, organization_id, scheduled_at,
            duration_minutes, ends_at, busy)
        SELECT gen_random_uuid(), m.id, m.organization_id, t, 30, t, tstzrange(t, t)
        FROM mentorships m,
             LATERAL (SELECT date_trunc('hour', now()) + make_interval(hours => g) AS t
                      FROM generate_series(-20, 5000) g) s
        WHERE m.id = :'m'""", m=m["id"])
    rows = psql("""SELECT id, scheduled_at > now() FROM mentorship_sessions
                   WHERE mentorship_id = :'m' ORDER BY scheduled_at""", m=m["id"])
    got = events(parse(fetch(new_feed(org.client("Teacher"))).content))
    assert len(got) == 5000
    coming = ["%s@coachd" % r[0] for r in rows if r[1] == "t"]
    assert len(coming) == 5000
    assert set(coming) == set(got)  # the last one included, every past one left out


def test_backslashes_come_back_as_stored(org):
    """Backslashes next to letters and delimiters (a Windows path, `\\n` typed as text, `\\,`)
    read back exactly through ical.js. python3-icalendar 4.0.3 reads an escaped backslash before
    n as a line break, so only ical.js checks these."""
    title = "C:\\new\\, A\\;B \\\\ end"
    notes = "see C:\\notes\\nx, then a\\\\b; \\"
    m = make_mentorship(org, title=title)
    s = make_session(org, m["id"], notes=notes)["data"]
    _, evs = icaljs(fetch(new_feed(org.client("Teacher"))).content)
    ev = evs["%s@coachd" % s["id"]]
    assert ev["summary"] == title
    assert "\n" + notes + "\n" in ev["description"]
