#!/usr/bin/python3
"""Setup of scripts/faults' chat load, through the API tests' fixtures (tests/api): an
organization with a coach and a teacher in an active mentorship, each with one push token
registered through POST /api/users/me/push-tokens. Writes OUT (JSON): the mentorship id, the
organization id, and per participant its user id, session cookie and push token.

Needs the COACHD_* variables of tests/api/helpers.py (COACHD_URL, COACHD_DATABASE_URL,
COACHD_REDIS_URL) in the environment."""
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "api"))

from chat_fixtures import Chat  # noqa: E402
from helpers import SESSION_COOKIE  # noqa: E402

out = sys.argv[1]
chat = Chat()
people = {}
for role in ("Coach", "Teacher"):
    c = chat.c(role)
    token = "ExponentPushToken[fault-%s-%s]" % (role.lower(), uuid.uuid4().hex[:12])
    c.post_json("/api/users/me/push-tokens", {"token": token, "platform": "ios"}, expect=201)
    people[role] = {"userId": chat.uid(role), "cookie": "%s=%s" % (SESSION_COOKIE, c.session_token),
                    "pushToken": token}
with open(out, "w") as f:
    json.dump({"mentorshipId": chat.id, "organizationId": chat.org.id, "people": people}, f)
