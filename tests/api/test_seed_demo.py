"""`coachd seed-demo`: demo data for client development, read back through the API. The command
seeds a database of its own (temp_database) and a second coachd serves it; every answer read
here is checked against docs/openapi.json by the Client (openapi_check), so the seeded rows are
ones the API documents. Also: the printed accounts and invite links, a second run that changes
nothing, the refusal in production, a database where some demo email is taken, and the s3
driver for the attachment."""
import contextlib
import hashlib
import json
import os
import re
import subprocess
import time
from datetime import datetime, timezone

import pytest
import requests

from helpers import (REDIS_URL, ROOT, Client, assert_error, free_port, psql_at, second_coachd,
                     temp_database)

BIN = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
REDIS_OWN = REDIS_URL.rsplit("/", 1)[0] + "/12"
FRONTEND = "http://app.example"
S3 = os.environ.get("COACHD_S3_ENDPOINT")

# (role, email, password) as the command prints them.
ACCOUNTS = [
    ("Owner", "owner@northwind.example", "Demo-owner-2026!"),
    ("OrganizationAdmin", "admin@northwind.example", "Demo-admin-2026!"),
    ("OrganizationAdmin", "admin2@northwind.example", "Demo-admin-2026!"),
    ("Manager", "manager@northwind.example", "Demo-manager-2026!"),
    ("Coach", "coach@northwind.example", "Demo-coach-2026!"),
    ("Coach", "coach2@northwind.example", "Demo-coach-2026!"),
    ("Coach", "coach3@northwind.example", "Demo-coach-2026!"),
    ("Teacher", "teacher@northwind.example", "Demo-teacher-2026!"),
    ("Teacher", "teacher2@northwind.example", "Demo-teacher-2026!"),
    ("Teacher", "teacher3@northwind.example", "Demo-teacher-2026!"),
    ("Teacher", "teacher4@northwind.example", "Demo-teacher-2026!"),
    ("Teacher", "teacher5@northwind.example", "Demo-teacher-2026!"),
    ("Teacher", "teacher@sierra-azul.example", "Demo-teacher-2026!"),
]
PASSWORDS = {email: pw for _, email, pw in ACCOUNTS}
INVITED = {"new.coach@northwind.example", "new.teacher@northwind.example",
           "nueva.docente@northwind.example", "nuevo.profesor@sierra-azul.example"}
FINAL = {"completed", "cancelled", "missed"}
# Row counts of the tables the command writes (a second run must leave them as they are).
TABLES = ["users", "accounts", "organizations", "organization_memberships", "invites",
          "mentorships", "mentorship_sessions", "files", "file_attachments", "chat_messages",
          "chat_message_attachments", "chat_reactions", "chat_read_receipts", "chat_clocks",
          "chat_counts", "chat_conversations", "organization_member_counts"]


def seed(url, storage, **env):
    full = dict(os.environ, DATABASE_URL=url, STORAGE_DRIVER="local", STORAGE_DIR=storage,
                FRONTEND_URL=FRONTEND, APP_ENV="development")
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return subprocess.run([BIN, "seed-demo"], capture_output=True, text=True, env=full, timeout=120)


def org_ids(out):
    nw = re.search(r"Northwind Academy\s+([0-9a-f-]{36})", out).group(1)
    sa = re.search(r"Colegio Sierra Azul\s+([0-9a-f-]{36})", out).group(1)
    return nw, sa


def counts(url):
    sql = " UNION ALL ".join("SELECT '%s', count(*) FROM %s" % (t, t) for t in TABLES)
    return dict(psql_at(url, sql))


@contextlib.contextmanager
def serve(url, **env):
    subprocess.run(["redis-cli", "-u", REDIS_OWN, "FLUSHDB"], check=True, capture_output=True)
    port = free_port()
    with second_coachd(PORT=port, DATABASE_URL=url, REDIS_URL=REDIS_OWN,
                       PUBLIC_URL="http://127.0.0.1:%d" % port, FRONTEND_URL=FRONTEND,
                       **env) as base:
        yield base


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """(database url, storage dir, first run's output, base url of a coachd serving it)."""
    storage = str(tmp_path_factory.mktemp("demo-storage"))
    with temp_database() as url:
        r = seed(url, storage)
        assert r.returncode == 0, r.stderr
        with serve(url, STORAGE_DRIVER="local", STORAGE_DIR=storage) as base:
            yield url, storage, r.stdout, base


def sign_in(base, email, org_id=None):
    c = Client(base_url=base, org_id=org_id)
    c.post_json("/api/auth/sign-in/email", {"email": email, "password": PASSWORDS[email]})
    return c


def now_utc():
    return datetime.now(timezone.utc)


def when(ts):
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def test_prints_the_accounts_organizations_and_invite_links(demo):
    url, _, out, _ = demo
    assert out.startswith("Demo data created.")
    for role, email, password in ACCOUNTS:
        line = next(ln for ln in out.splitlines() if " %s " % email in ln)
        assert line.split()[0] == role and password in line, line
    nw, sa = org_ids(out)
    assert psql_at(url, "SELECT name FROM organizations WHERE id = '%s'" % nw) == \
        [("Northwind Academy",)]
    links = re.findall(r"^ +\S+ +(\S+@\S+) +.+ (%s/invite\?token=[A-Za-z0-9_-]{43}&lang=(en|es))$"
                       % re.escape(FRONTEND), out, re.M)
    assert {e for e, _, _ in links} == INVITED, out
    assert {e: lang for e, _, lang in links}["nueva.docente@northwind.example"] == "es"
    assert "shown only now" in out


def test_every_account_signs_in_and_no_one_is_held_at_the_invite_gate(demo):
    _, _, _, base = demo
    for role, email, _ in ACCOUNTS:
        c = sign_in(base, email)
        me = c.get_json("/api/users/me")["data"]
        assert me["email"] == email and me["emailVerified"] is True, me
        assert me["globalRole"] == ("Owner" if role == "Owner" else None), me
        # An org route: a pending invite for the address would answer 403 INVITE_GATE.
        assert c.get_json("/api/invites/my-pending")["meta"]["total_count"] == 0
        r = c.get("/api/chat/conversations")
        assert r.status_code == 200, (email, r.text)


def test_the_coach_has_a_mentorship_in_every_status_and_sessions_past_and_upcoming(demo):
    _, _, out, base = demo
    nw, _ = org_ids(out)
    coach = sign_in(base, "coach@northwind.example")
    statuses = sorted(m["status"] for m in coach.get_json("/api/mentorships")["data"])
    assert statuses == ["active", "active", "ended", "paused", "pending"], statuses
    manager = sign_in(base, "manager@northwind.example")
    org_list = manager.get_json("/api/mentorships?limit=200")["data"]
    assert len(org_list) == 7 and all(m["organizationId"] == nw for m in org_list)

    sessions = manager.get_json("/api/sessions?limit=200")["data"]
    assert {s["status"] for s in sessions} == {"scheduled", "confirmed", "completed",
                                               "cancelled", "missed"}
    now = now_utc()
    past = [s for s in sessions if when(s["scheduledAt"]) < now]
    upcoming = [s for s in sessions if when(s["scheduledAt"]) > now]
    assert past and upcoming
    assert {s["status"] for s in past} == FINAL
    assert {s["status"] for s in upcoming} == {"scheduled", "confirmed"}
    for s in sessions:
        assert s["videoChannel"] == "ms_%s_%d" % (
            s["id"], int(when(s["createdAt"]).timestamp() * 1000)), s
        assert when(s["createdAt"]) < now
        assert (s["completedAt"] is not None) == (s["status"] == "completed"), s
        assert (s["cancelledBy"] is not None) == (s["status"] == "cancelled"), s
    mine = coach.get_json("/api/sessions?limit=200")["data"]
    assert {s["status"] for s in mine} == {"scheduled", "confirmed", "completed", "cancelled",
                                           "missed"}
    one = coach.get_json("/api/sessions/%s" % mine[0]["id"])["data"]
    assert one["coach"]["email"] == "coach@northwind.example"
    # Upcoming sessions keep the spacing rule: a session over an existing one is refused.
    up = next(s for s in mine if s["status"] == "scheduled")
    r = coach.post("/api/sessions", json={"mentorshipId": up["mentorshipId"],
                                          "scheduledAt": up["scheduledAt"]})
    assert_error(r, 409, "SESSION_CONFLICT")

    teacher = sign_in(base, "teacher@northwind.example")
    ments = teacher.get_json("/api/mentorships")["data"]
    assert len(ments) == 1 and ments[0]["notes"] is None and ments[0]["status"] == "active"


def test_chat_threads_with_replies_reactions_edits_and_an_attachment(demo):
    _, _, out, base = demo
    coach = sign_in(base, "coach@northwind.example")
    convs = coach.get_json("/api/chat/conversations")["data"]
    assert len(convs) == 4, convs  # the pending mentorship has no messages yet
    emma = next(c for c in convs if c["otherUser"]["firstName"] == "Emma")
    assert emma["unreadCount"] == 1 and emma["lastMessage"]["senderId"] == emma["otherUser"]["id"]
    mid = emma["mentorshipId"]
    assert coach.get_json("/api/mentorships/%s/chat/unread" % mid)["data"]["unreadCount"] == 1

    body = coach.get_json("/api/mentorships/%s/chat/messages?limit=100" % mid)
    msgs = body["data"]
    assert len(msgs) == 12 and body["meta"]["hasMore"] is False  # one of 13 was deleted
    assert msgs[0]["id"] == emma["lastMessage"]["id"]
    times = [m["createdAt"] for m in msgs]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
    replies = [m for m in msgs if m["replyTo"]]
    assert len(replies) >= 3 and all(r["replyTo"]["senderName"] for r in replies)
    assert any(m["editedAt"] for m in msgs)
    reacted = [m for m in msgs if m["reactions"]]
    assert len(reacted) >= 3
    party = next(m for m in reacted if len(m["reactions"]) == 2)
    assert [r["emoji"] for r in party["reactions"]] == ["🎉", "👏"]
    assert party["reactions"][0]["count"] == 2

    files = [a for m in msgs for a in m["attachments"]]
    assert len(files) == 1, files
    att = files[0]
    assert att["filename"] == "Week 3 lesson plan.txt" and att["mimeType"] == "text/plain"
    r = coach.get(att["url"])
    assert r.status_code == 200 and len(r.content) == att["sizeBytes"], r.text
    assert r.content.startswith(b"Week 3 lesson plan")
    meta = coach.get_json("/api/files/%s" % att["fileId"])["data"]
    assert meta["sha256Hash"] == hashlib.sha256(r.content).hexdigest()
    listed = coach.get_json("/api/files/mentorship/%s/attachments" % mid)["data"]
    assert [a["fileId"] for a in listed] == [att["fileId"]]
    teacher = sign_in(base, "teacher@northwind.example")
    assert teacher.get(teacher.get_json("/api/files/%s" % att["fileId"])["data"][
        "presignedUrl"]).content == r.content

    # The conversation goes on where the seed left it: a new post is the newest message, and
    # reading it clears the count.
    post = coach.post_json("/api/mentorships/%s/chat/messages" % mid,
                           {"body": "Not graded, they are for feedback.",
                            "replyToMessageId": msgs[0]["id"]}, expect=201)["data"]
    assert post["createdAt"] > msgs[0]["createdAt"]
    newest = coach.get_json("/api/mentorships/%s/chat/messages?limit=1" % mid)["data"][0]
    assert newest["id"] == post["id"]
    coach.call("PATCH", "/api/mentorships/%s/chat/read-receipt" % mid,
               {"lastReadMessageId": post["id"]}, expect=204)
    assert coach.get_json("/api/mentorships/%s/chat/unread" % mid)["data"]["unreadCount"] == 0

    # Spanish threads in both organizations.
    _, sa = org_ids(out)
    sofia = sign_in(base, "coach2@northwind.example", org_id=sa)
    convs = sofia.get_json("/api/chat/conversations")["data"]
    assert len(convs) == 1 and convs[0]["lastMessage"]["body"].startswith("Sí,")


def test_members_and_pending_invites_as_the_admins_see_them(demo):
    _, _, out, base = demo
    nw, sa = org_ids(out)
    admin = sign_in(base, "admin@northwind.example")
    members = admin.get_json("/api/organizations/%s/users?limit=100" % nw)
    assert members["meta"]["total_count"] == 11
    roles = sorted(m["roleInOrganization"] for m in members["data"])
    assert roles == ["Coach"] * 3 + ["Manager"] + ["OrganizationAdmin"] * 2 + ["Teacher"] * 5
    invites = admin.get_json("/api/organizations/%s/invites" % nw)
    assert {i["email"] for i in invites["data"]} == INVITED - {"nuevo.profesor@sierra-azul.example"}
    assert all(i["status"] == "pending" and when(i["expiresAt"]) > now_utc()
               for i in invites["data"])
    lucia = sign_in(base, "admin2@northwind.example")
    orgs = lucia.get_json("/api/me/organizations")["data"]
    assert {o["id"] for o in orgs["organizations"]} == {nw, sa}
    assert [i["email"] for i in lucia.get_json("/api/organizations/%s/invites" % sa)["data"]] == \
        ["nuevo.profesor@sierra-azul.example"]
    owner = sign_in(base, "owner@northwind.example")
    assert {o["id"] for o in owner.get_json("/api/organizations")["data"]} == {nw, sa}
    assert owner.get_json("/api/me/current-organization")["data"]["id"] == nw

    # A printed link resolves and accepts as a new account.
    token = re.search(r"new\.teacher@northwind\.example.*token=([A-Za-z0-9_-]+)", out).group(1)
    anon = Client(base_url=base)
    info = anon.get_json("/api/invites/%s" % token)["data"]
    assert info["isAvailable"] is True and info["hasAccount"] is False, info
    assert info["organizationName"] == "Northwind Academy"


def test_a_second_run_changes_nothing(tmp_path):
    with temp_database() as url:
        first = seed(url, str(tmp_path))
        assert first.returncode == 0, first.stderr
        before = counts(url)
        assert before["chat_messages"] == "26" and before["mentorship_sessions"] == "20", before
        objects = sorted(p for p in tmp_path.rglob("*") if p.is_file())
        again = seed(url, str(tmp_path))
        assert again.returncode == 0, again.stderr
        assert counts(url) == before
        assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == objects
        assert again.stdout.startswith("Demo data is already there: nothing changed.")
        assert org_ids(again.stdout) == org_ids(first.stdout)
        for _, email, password in ACCOUNTS:
            assert email in again.stdout and password in again.stdout
        assert "invite?token=" not in again.stdout
        assert "4 of the demo's are still pending" in again.stdout


def test_refused_in_production(tmp_path):
    with temp_database() as url:
        r = seed(url, str(tmp_path), APP_ENV="production")
        assert r.returncode == 1 and "refused: APP_ENV=production" in r.stderr, r
        assert r.stdout == ""
        # Refused before anything, migrations included.
        assert psql_at(url, "SELECT count(*) FROM pg_tables WHERE tablename = 'users'") == [("0",)]


def test_a_taken_demo_email_leaves_the_database_as_it_was(tmp_path):
    with temp_database() as url:
        env = dict(os.environ, DATABASE_URL=url)
        subprocess.run([BIN, "migrate"], check=True, capture_output=True, env=env, timeout=60)
        psql_at(url, "INSERT INTO users (id, email) VALUES ('c%s', 'coach@northwind.example')"
                % ("0" * 24))
        r = seed(url, str(tmp_path))
        assert r.returncode == 1 and "1 of the 13 demo accounts exist already" in r.stderr, r
        assert counts(url)["users"] == "1" and counts(url)["organizations"] == "0"
        assert not any(tmp_path.rglob("*.txt"))


def test_an_invited_address_with_an_account_leaves_the_database_as_it_was(tmp_path):
    with temp_database() as url:
        env = dict(os.environ, DATABASE_URL=url)
        subprocess.run([BIN, "migrate"], check=True, capture_output=True, env=env, timeout=60)
        psql_at(url, "INSERT INTO users (id, email) "
                     "VALUES ('c%s', 'nueva.docente@northwind.example')" % ("0" * 24))
        r = seed(url, str(tmp_path))
        assert r.returncode == 1 and "invite gate" in r.stderr, r
        assert counts(url)["users"] == "1" and counts(url)["invites"] == "0"


@pytest.mark.skipif(not S3, reason="s3rver not started (scripts/test starts it)")
def test_the_attachment_on_the_s3_driver(tmp_path):
    s3 = dict(STORAGE_DRIVER="s3", S3_ENDPOINT=S3, S3_REGION="us-east-1", S3_BUCKET="coach-files",
              S3_ACCESS_KEY_ID="S3RVER", S3_SECRET_ACCESS_KEY="S3RVER", S3_FORCE_PATH_STYLE="true")
    with temp_database() as url:
        r = seed(url, str(tmp_path), **s3)
        assert r.returncode == 0, r.stderr
        assert not any(p.is_file() for p in tmp_path.rglob("*")), "stored locally"
        with serve(url, **s3) as base:
            coach = sign_in(base, "coach@northwind.example")
            convs = coach.get_json("/api/chat/conversations")["data"]
            mid = next(c for c in convs if c["otherUser"]["firstName"] == "Emma")["mentorshipId"]
            msgs = coach.get_json("/api/mentorships/%s/chat/messages?limit=100" % mid)["data"]
            att = [a for m in msgs for a in m["attachments"]][0]
            assert att["url"].startswith(S3 + "/coach-files/uploads/")
            got = requests.get(att["url"], timeout=15)
            assert got.status_code == 200 and got.content.startswith(b"Week 3 lesson plan")
            meta = coach.get_json("/api/files/%s" % att["fileId"])["data"]
            assert meta["sha256Hash"] == hashlib.sha256(got.content).hexdigest()


def readme_walk():
    """The shell lines of README.md's quick start that talk to the server (curl), joined where a
    line ends in a backslash."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    start = text.index("## Quick start")
    section = text[start:text.index("\n## ", start + 1)]
    lines, cur = [], ""
    for raw in section.splitlines():
        if not raw.startswith("    "):
            continue
        cur += raw.strip()
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        if cur.startswith("curl "):
            lines.append(cur)
        cur = ""
    return lines


def test_the_readme_quick_start_walk_works_as_written(demo, tmp_path):
    """README's walk, run as written (only the host and the mentorship id M replaced): the demo
    coach signs in with the printed password, reads profile, organizations, mentorships and the
    chat, opens the mentorship's stream and sees the message posted meanwhile arrive."""
    _, _, _, base = demo
    walk = readme_walk()
    assert len(walk) >= 6, walk
    assert any("coach@northwind.example" in w and PASSWORDS["coach@northwind.example"] in w
               for w in walk), walk
    coach = sign_in(base, "coach@northwind.example")
    m = next(x["id"] for x in coach.get_json("/api/mentorships")["data"] if x["status"] == "active")

    def shell(line):
        line = line.replace("http://localhost:8080", base).replace("/M/", "/%s/" % m)
        return line.split(" # ")[0]

    stream = None
    for line in walk:
        cmd = shell(line)
        if " -N " in cmd:  # the live stream: open it, post the next line's message into it
            stream = subprocess.Popen("exec " + cmd.replace("curl ", "curl -s --max-time 8 ", 1),
                                      shell=True, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
            time.sleep(1)
            continue
        r = subprocess.run(cmd.replace("curl ", "curl -s -w '\\n%{http_code}' ", 1), shell=True,
                           cwd=tmp_path, capture_output=True, text=True, timeout=30)
        body, _, status = r.stdout.rpartition("\n")
        assert status in ("200", "201"), (line, status, body)
        assert json.loads(body), (line, body)
    assert stream, "the walk opens the mentorship's stream"
    out, _ = stream.communicate(timeout=20)
    assert "event: chat-message" in out and '"body":"Hello"' in out, out
