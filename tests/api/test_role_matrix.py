"""The role matrix over HTTP: one test per row of tests/role_matrix.tsv (every endpoint x every
caller x the resource's relation to the caller), checking the status the API answers.
tests/unit/domain/role_matrix.c walks the same rows through domain/permissions.h, so the rules
and the server agree.

The world (built once): organization A with an OrganizationAdmin, a Manager, the pair Coach /
Teacher (mentorship "own"), the pair Coach2 / Teacher2 (mentorship "other"), a Coach whose
membership is disabled (DisabledMember) and a Coach whose account is archived (ArchivedUser);
organization B with an OrganizationAdmin (OtherOrgAdmin) and the pair CoachB / TeacherB
(mentorship "otherorg"); a PlatformAdmin and an Owner. Each mentorship has one session and one
file its coach uploaded, attached to it, and one chat message of its coach. Every caller sends
X-Organization-Id of its own organization (A for the global roles). Rows that change or remove
something (path parameters named fresh_*, creations) get a resource of their own."""
import datetime
import itertools
import os
import uuid

import pytest
import requests

from chat_fixtures import insert_messages
from helpers import PASSWORD, Client, psql, sign_up, unique_email
from ment_fixtures import iso, make_mentorship, make_session
from orgs import Org, make_platform_admin

TABLE = os.path.join(os.path.dirname(__file__), "..", "role_matrix.tsv")
COLUMNS = ("method", "path", "action", "auth", "min", "actor", "relation", "status")


def read_table():
    rows = []
    with open(TABLE, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#") or line.startswith("method\t"):
                continue
            row = dict(zip(COLUMNS, line.split("\t")))
            row["status"] = int(row["status"])
            rows.append(row)
    return rows


ROWS = read_table()


def row_id(row):
    return "%s %s %s/%s" % (row["action"], row["actor"], row["relation"], row["status"])


class World:
    def __init__(self):
        pa_client, _ = make_platform_admin()
        self.a = Org(pa_client, roles=("OrganizationAdmin", "Manager"))
        for key, role in (("Coach", "Coach"), ("Teacher", "Teacher"), ("Coach2", "Coach"),
                          ("Teacher2", "Teacher"), ("DisabledMember", "Coach"),
                          ("ArchivedUser", "Coach")):
            self.a.add_member(role, key=key)
        self.b = Org(pa_client, roles=("OrganizationAdmin", "Manager"))
        self.b.add_member("Coach", key="CoachB")
        self.b.add_member("Teacher", key="TeacherB")
        # A disabled membership keeps its session but loses the organization.
        pa_client.delete_json("/api/organizations/%s/users/%s" % (
            self.a.id, self.a.uid("DisabledMember")))
        pa_client.org(None).patch_json("/api/users/%s" % self.a.uid("ArchivedUser"),
                                       {"status": "archived"})

        self.clients = {"NoSession": Client(org_id=self.a.id)}
        for key in ("OrganizationAdmin", "Manager", "Coach", "Teacher", "DisabledMember",
                    "ArchivedUser"):
            self.clients[key] = self.a.client(key)
        self.clients["OtherOrgAdmin"] = self.b.client("OrganizationAdmin")
        for role in ("PlatformAdmin", "Owner"):
            c, u = make_platform_admin(role)
            self.clients[role] = c.org(self.a.id)
        self.user_ids = {key: c.user["id"] for key, c in self.clients.items() if c.user}

        self.pa = pa_client
        self.pairs = pairs = {"own": (self.a, "Coach", "Teacher"),
                              "other": (self.a, "Coach2", "Teacher2"),
                              "otherorg": (self.b, "CoachB", "TeacherB")}
        self.orgs = {"own": self.a, "otherorg": self.b}
        self.member = {"own": self.a.uid("Coach2"), "otherorg": self.b.uid("CoachB")}
        self.hours = itertools.count(48)
        self.org = {"own": self.a.id, "otherorg": self.b.id}
        self.user = {"other": self.a.uid("Coach2"), "otherorg": self.b.uid("CoachB"),
                     "admin": self.a.uid("OrganizationAdmin")}
        self.ment, self.session, self.file, self.msg = {}, {}, {}, {}
        for rel, (org, coach, teacher) in pairs.items():
            m = make_mentorship(org, coach=coach, teacher=teacher, by="OrganizationAdmin")
            self.ment[rel] = m["id"]
            self.session[rel] = make_session(org, m["id"], by=coach)["data"]["id"]
            fid = str(uuid.uuid4())
            psql("INSERT INTO files (id, organization_id, uploader_id, filename, mime_type,"
                 " size_bytes, storage_key) VALUES (:'f', :'o', :'u', 'matrix.txt', 'text/plain',"
                 " 1, :'k')", f=fid, o=org.id, u=org.uid(coach), k="matrix/%s" % fid)
            psql("INSERT INTO file_attachments (id, file_id, object_type, object_id, created_by)"
                 " VALUES (:'id', :'f', 'mentorship', :'m', :'u')",
                 id=str(uuid.uuid4()), f=fid, m=m["id"], u=org.uid(coach))
            self.file[rel] = fid
            self.msg[rel] = insert_messages(m["id"], org.uid(coach), ["role matrix"],
                                            base_sql="now() - interval '1 minute'")[0]

    def future(self):
        """A start time no other row's session uses (sessions 15 minutes apart conflict)."""
        t = datetime.datetime.now(datetime.timezone.utc).replace(minute=0, second=0,
                                                                  microsecond=0)
        return iso(t + datetime.timedelta(hours=next(self.hours)))

    def new_file(self, rel, attached):
        org, coach, _ = self.pairs[rel]
        fid = str(uuid.uuid4())
        psql("INSERT INTO files (id, organization_id, uploader_id, filename, mime_type,"
             " size_bytes, storage_key) VALUES (:'f', :'o', :'u', 'matrix.txt', 'text/plain',"
             " 1, :'k')", f=fid, o=org.id, u=org.uid(coach), k="matrix/%s" % fid)
        if attached:
            psql("INSERT INTO file_attachments (id, file_id, object_type, object_id, created_by)"
                 " VALUES (:'id', :'f', 'mentorship', :'m', :'u')",
                 id=str(uuid.uuid4()), f=fid, m=self.ment[rel], u=org.uid(coach))
        return fid

    def fresh(self, name, rel):
        """The fresh_* path parameters: a resource for this row alone."""
        if name == "fresh_s":
            org, coach, _ = self.pairs[rel]
            return make_session(org, self.ment[rel], by=coach,
                                scheduledAt=self.future())["data"]["id"]
        if name == "fresh_f":
            return self.new_file(rel, attached=False)
        if name == "fresh_af":
            return self.new_file(rel, attached=True)
        if name == "fresh_m":
            org, coach, _ = self.pairs[rel]
            m = org.client("OrganizationAdmin").post_json("/api/mentorships", {
                "organizationId": org.id, "coachId": org.uid(coach),
                "teacherId": self.new_teacher(rel)}, expect=201)["data"]
            org.client("Manager").patch_json("/api/mentorships/%s" % m["id"], {"status": "active"})
            return m["id"]
        if name == "fresh_org":
            return self.pa.post_json("/api/organizations", {
                "name": "Matrix %s" % uuid.uuid4().hex[:8]}, expect=201)["data"]["id"]
        if name == "fresh_user":
            org = self.orgs["otherorg" if rel == "otherorg" else "own"]
            uid = self.new_user()
            self.pa.post_json("/api/organizations/%s/users" % org.id,
                              {"userId": uid, "roleInOrganization": "Coach"}, expect=201)
            return uid
        if name == "fresh_msg":
            org, coach, _ = self.pairs[rel]
            return insert_messages(self.ment[rel], org.uid(coach), ["role matrix"],
                                   base_sql="now()")[0]
        raise KeyError(name)

    def new_user(self):
        return sign_up(email=unique_email("matrix"), name="Matrix User")[1]["id"]

    def new_teacher(self, rel):
        """A Teacher of the relation's organization without a mentorship."""
        org = self.pairs[rel][0]
        uid = self.new_user()
        self.pa.post_json("/api/organizations/%s/users" % org.id,
                          {"userId": uid, "roleInOrganization": "Teacher"}, expect=201)
        return uid

    def request(self, row):
        actor, rel, action = row["actor"], row["relation"], row["action"]
        client = self.clients[actor]
        user = self.user_ids.get(actor, "me") if rel == "own" else self.user.get(rel)
        fresh = {name: self.fresh(name, rel) for name in
                 ("fresh_s", "fresh_f", "fresh_af", "fresh_msg", "fresh_m", "fresh_user",
                              "fresh_org")
                 if "{%s}" % name in row["path"]}
        path = row["path"].format(org=self.org.get(rel), user=user, m=self.ment.get(rel),
                                  s=self.session.get(rel), f=self.file.get(rel),
                                  member=self.member.get(rel), msg=self.msg.get(rel), emoji="%F0%9F%91%8D", **fresh)
        body = None
        if action == "member.update":
            body = {"isPrimary": False}
        elif action == "member.add":
            body = {"userId": self.new_user(), "roleInOrganization": "Teacher"}
        elif action == "mentorship.create":
            org, coach, _ = self.pairs[rel]
            body = {"organizationId": org.id, "coachId": org.uid(coach),
                    "teacherId": self.new_teacher(rel)}
        elif action == "session.create":
            body = {"mentorshipId": self.ment[rel], "scheduledAt": self.future()}
        elif action == "file.attach":
            body = {"objectType": "mentorship", "objectId": self.ment[rel]}
        elif action == "users.create":
            body = {"email": unique_email("matrix"), "firstName": "Matrix", "lastName": "User",
                    "password": "grid cell secret 1"}
        elif action == "mentorship.status":
            body = {"status": "paused"}
        elif action == "session.confirm":
            body = {"status": "confirmed"}
        elif action == "push.register":
            body = {"token": "ExponentPushToken[%s]" % uuid.uuid4().hex, "platform": "ios"}
        elif action == "users.me.update":
            body = {"firstName": "Matrix"}
        elif action == "session.react":
            body = {"emoji": "\U0001F44D"}
        elif action == "chat.react":
            body = {"emoji": "\U0001F44D"}
        elif action == "files.presign":
            body = {"filename": "matrix.txt", "mimeType": "text/plain", "sizeBytes": 5}
        elif action == "chat.receipt":
            body = {"lastReadMessageId": self.msg[rel]}
        elif action == "chat.edit":
            body = {"body": "role matrix, edited"}
        elif action == "org.create":
            body = {"name": "Matrix %s" % uuid.uuid4().hex[:8]}
        elif action == "org.update":
            body = {"description": "role matrix"}
        elif action.startswith("org.invite."):
            body = {"email": unique_email("matrix"),
                    "roleInOrganization": action.split(".")[2].capitalize()}
        elif action == "me.switch":
            body = {"organizationId": self.org[rel]}
        elif action == "user.update":
            body = {"firstName": "Matrix"}
        elif action in ("mentorship.update",):
            body = {"title": "Role matrix"}
        elif action == "session.update":
            body = {"notes": "role matrix"}
        elif action == "chat.post":
            body = {"body": "role matrix"}
        elif action.startswith("auth.two-factor."):
            body = {"password": PASSWORD}
        if action.startswith("stream."):
            r = client.request(row["method"], path, stream=True, timeout=10)
            r.close()
            return r
        kwargs = {"json": body} if body is not None else {}
        return client.request(row["method"], path, **kwargs)


@pytest.fixture(scope="module")
def world():
    return World()


def test_table_covers_every_actor_and_action():
    actors = {r["actor"] for r in ROWS}
    assert actors == {"NoSession", "ArchivedUser", "DisabledMember", "PlatformAdmin", "Owner",
                      "OrganizationAdmin", "Manager", "Coach", "Teacher", "OtherOrgAdmin"}
    keys = [(r["action"], r["actor"], r["relation"]) for r in ROWS]
    assert len(keys) == len(set(keys)), "a row appears twice"
    # every action is asked of every actor
    per_action = {}
    for r in ROWS:
        per_action.setdefault(r["action"], set()).add(r["actor"])
    assert all(a == actors for a in per_action.values())


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_role_matrix(world, row):
    r = world.request(row)
    assert r.status_code == row["status"], "%s %s as %s (%s): expected %d, got %d: %s" % (
        row["method"], row["path"], row["actor"], row["relation"], row["status"],
        r.status_code, r.text[:300] if not row["action"].startswith("stream.") else "")
