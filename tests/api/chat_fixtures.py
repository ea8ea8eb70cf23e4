"""Fixtures of the chat tests: an organization with a mentorship between a named coach and
teacher, outsiders of the same organization, and helpers for the chat paths."""
import uuid

from helpers import psql
from ment_fixtures import make_mentorship
from orgs import new_org


class Chat:
    """org (orgs.Org with OrganizationAdmin, Manager, Coach "Carla Coach", Teacher "Tom Teacher",
    Coach2 and Teacher2 outside the mentorship) and m (their active mentorship)."""

    def __init__(self):
        self.org = new_org(roles=("OrganizationAdmin", "Manager"))
        self.org.add_member("Coach", first="Carla", last="Coach")
        self.org.add_member("Teacher", first="Tom", last="Teacher")
        self.org.add_member("Coach", key="Coach2", first="Other")
        self.org.add_member("Teacher", key="Teacher2", first="Other")
        self.m = make_mentorship(self.org, title="Física")
        self.id = self.m["id"]

    def c(self, key):
        return self.org.client(key)

    def uid(self, key):
        return self.org.uid(key)

    def path(self, suffix="", mid=None):
        return "/api/mentorships/%s/chat%s" % (mid or self.id, suffix)

    def msgs(self, suffix="", mid=None):
        return self.path("/messages" + suffix, mid)

    def post(self, key, body, expect=201, **fields):
        fields["body"] = body
        return self.c(key).post_json(self.msgs(), fields, expect=expect)["data"]

    def history(self, key="Coach", expect=200, **query):
        return self.c(key).get_json(self.msgs(), expect=expect, params=query)

    def ids(self, key="Coach", **query):
        return [x["id"] for x in self.history(key, **query)["data"]]


def insert_messages(mentorship_id, sender_id, bodies, base_sql="now() - interval '1 hour'",
                    step_us=1):
    """Inserts messages straight into the table, `step_us` microseconds apart from `base_sql`
    (oldest first), bypassing the chat clock; returns their ids oldest first."""
    ids = [str(uuid.uuid4()) for _ in bodies]
    psql("INSERT INTO chat_messages (id, mentorship_id, sender_id, body, created_at)"
         " SELECT i::uuid, :'m', :'s', b, (%s) + make_interval(secs => (o - 1) * :step / 1e6)"
         " FROM unnest(string_to_array(:'ids', ','), string_to_array(:'bodies', E'\\x1f'))"
         " WITH ORDINALITY AS t(i, b, o)" % base_sql,
         m=mentorship_id, s=sender_id, ids=",".join(ids), bodies="\x1f".join(bodies),
         step=step_us)
    return ids
