"""Fixtures of the mentorship and session tests: mentorship and session factories through the
API, and push-token rows. Organizations come from orgs.py."""
import datetime
import uuid

from helpers import psql
from orgs import make_platform_admin


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
