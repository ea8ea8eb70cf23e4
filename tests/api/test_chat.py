"""Chat messages: post (validation, idempotency and its race, replies), edit, soft delete,
history pages (keyset cursor, many messages in one millisecond), access of every role."""
import concurrent.futures
import datetime
import re
import uuid

import pytest

from chat_fixtures import Chat, insert_messages
from helpers import Client, assert_error, psql, psql_value
from ment_fixtures import make_mentorship
from orgs import make_platform_admin, new_org

ISO_US = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
UNKNOWN = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def chat():
    return Chat()


def parse_us(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")


# ---- post ----------------------------------------------------------------------------------


def test_post_returns_the_message(chat):
    cid = str(uuid.uuid4())
    m = chat.post("Teacher", "  Hola, ¿qué tal?  \n", clientMessageId=cid.upper())
    assert set(m) == {"id", "mentorshipId", "senderId", "body", "clientMessageId", "createdAt",
                      "editedAt", "deletedAt", "replyToMessageId", "replyTo", "attachments",
                      "reactions", "sender"}
    assert m["body"] == "Hola, ¿qué tal?"  # trimmed
    assert m["mentorshipId"] == chat.id and m["senderId"] == chat.uid("Teacher")
    assert m["clientMessageId"] == cid
    assert ISO_US.match(m["createdAt"]), m["createdAt"]
    assert (m["editedAt"], m["deletedAt"], m["replyToMessageId"], m["replyTo"]) == (None,) * 4
    assert m["attachments"] == [] and m["reactions"] == []
    assert m["sender"] == {"id": chat.uid("Teacher"), "firstName": "Tom", "lastName": "Teacher",
                           "email": chat.org.users["Teacher"]["email"], "avatar": None}
    page = chat.history("Coach")
    assert page["data"] == [m]
    assert page["meta"] == {"nextCursor": m["createdAt"], "hasMore": False}


def test_body_rules(chat):
    c = chat.c("Coach")
    for bad in ({}, {"body": ""}, {"body": " \n\t\u00a0"}, {"body": 5}, {"body": None},
                {"body": "x" * 4001}, {"body": "😀" * 4001},
                {"body": "ok", "clientMessageId": "not-a-uuid"},
                {"body": "ok", "clientMessageId": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"},  # v1
                {"body": "ok", "replyToMessageId": "nope"},
                {"body": "ok", "attachmentIds": "x"},
                {"body": "ok", "attachmentIds": [str(uuid.uuid4()) for _ in range(6)]},
                {"body": "ok", "attachmentIds": [UNKNOWN, UNKNOWN]}):
        err = assert_error(c.post(chat.msgs(), json=bad), 400, "VALIDATION_ERROR")
        assert err["details"], bad
    assert_error(c.post(chat.msgs(), json={"body": "bad\u0000nul"}), 400, "VALIDATION_ERROR")
    # Invalid UTF-8 never reaches the handler as text.
    r = c.post(chat.msgs(), data=b'{"body": "\xff\xfe"}',
               headers={"Content-Type": "application/json"})
    assert_error(r, 400)
    # Limits count code points, not bytes.
    assert chat.post("Coach", "😀" * 4000)["body"] == "😀" * 4000
    assert chat.post("Coach", "  " + "a" * 4000 + "  ")["body"] == "a" * 4000
    assert psql_value("SELECT count(*) FROM chat_messages WHERE mentorship_id = :'m'",
                      m=chat.id) == "2"


def test_client_message_id_is_idempotent(chat):
    cid = str(uuid.uuid4())
    first = chat.post("Teacher", "once", clientMessageId=cid)
    again = chat.post("Teacher", "twice", clientMessageId=cid, expect=200)
    assert again == first
    # Another sender's message with the same client id is their own.
    other = chat.post("Coach", "mine", clientMessageId=cid)
    assert other["id"] != first["id"]
    assert chat.ids() == [other["id"], first["id"]]


def test_concurrent_posts_with_one_client_message_id(chat):
    cid = str(uuid.uuid4())
    c = chat.c("Teacher")

    def send(i):
        r = c.post(chat.msgs(), json={"body": "race %d" % i, "clientMessageId": cid})
        return r.status_code, r.json()["data"]

    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        got = list(ex.map(send, range(16)))
    statuses = sorted(s for s, _ in got)
    assert statuses == [200] * 15 + [201], statuses
    assert len({d["id"] for _, d in got}) == 1
    assert len({d["body"] for _, d in got}) == 1
    assert psql_value("SELECT count(*) FROM chat_messages WHERE client_message_id = :'c'",
                      c=cid) == "1"


def test_created_at_is_unique_under_concurrent_posts(chat):
    def send(i):
        key = ("Coach", "Teacher", "Manager", "OrganizationAdmin")[i % 4]
        return chat.post(key, "burst %d" % i)["createdAt"]

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        times = list(ex.map(send, range(40)))
    assert len(set(times)) == 40
    assert psql_value("SELECT count(DISTINCT created_at) FROM chat_messages"
                      " WHERE mentorship_id = :'m'", m=chat.id) == "40"


# ---- replies -------------------------------------------------------------------------------


def test_reply_preview_and_deleted_parent(chat):
    long = "ñ" * 100 + "😀" * 30  # 130 code points
    parent = chat.post("Coach", long)
    reply = chat.post("Teacher", "answer", replyToMessageId=parent["id"].upper())
    assert reply["replyToMessageId"] == parent["id"]
    assert reply["replyTo"] == {"id": parent["id"], "senderId": chat.uid("Coach"),
                                "senderName": "Carla Coach", "body": "ñ" * 100 + "😀" * 20}
    assert chat.history()["data"][0]["replyTo"] == reply["replyTo"]
    chat.c("Coach").delete(chat.msgs("/" + parent["id"]))
    shown = chat.history()["data"]
    assert [x["id"] for x in shown] == [reply["id"]]
    assert shown[0]["replyTo"] == dict(reply["replyTo"], body=None)
    assert shown[0]["replyToMessageId"] == parent["id"]


def test_reply_must_be_in_the_mentorship(chat):
    other = make_mentorship(chat.org, coach="Coach2", teacher="Teacher2")
    theirs = chat.c("Coach2").post_json(chat.msgs(mid=other["id"]), {"body": "x"},
                                        expect=201)["data"]
    for target in (theirs["id"], UNKNOWN):
        r = chat.c("Coach").post(chat.msgs(), json={"body": "re", "replyToMessageId": target})
        assert_error(r, 422, "UNPROCESSABLE")
    assert chat.ids() == []


# ---- edit and delete -----------------------------------------------------------------------


def test_edit_by_sender_within_the_window(chat):
    m = chat.post("Teacher", "frist")
    path = chat.msgs("/" + m["id"])
    e = chat.c("Teacher").patch_json(path, {"body": " first "})["data"]
    assert e["body"] == "first" and e["id"] == m["id"] and e["createdAt"] == m["createdAt"]
    assert e["editedAt"] and e["sender"]["id"] == chat.uid("Teacher")
    assert chat.history()["data"][0]["body"] == "first"
    for key in ("Coach", "Manager", "OrganizationAdmin"):
        assert_error(chat.c(key).patch(path, json={"body": "mine now"}), 403, "FORBIDDEN")
    assert_error(chat.c("Teacher").patch(path, json={"body": ""}), 400, "VALIDATION_ERROR")
    assert_error(chat.c("Teacher").patch(path, json={"body": "y" * 4001}), 400)
    psql("UPDATE chat_messages SET created_at = now() - interval '15 minutes 1 second'"
         " WHERE id = :'id'", id=m["id"])
    assert_error(chat.c("Teacher").patch(path, json={"body": "late"}), 422, "EDIT_WINDOW_EXPIRED")
    psql("UPDATE chat_messages SET created_at = now() - interval '14 minutes 50 seconds'"
         " WHERE id = :'id'", id=m["id"])
    chat.c("Teacher").patch_json(path, {"body": "just in time"})
    chat.c("Teacher").delete(path)
    assert_error(chat.c("Teacher").patch(path, json={"body": "gone"}), 404, "NOT_FOUND")
    assert_error(chat.c("Teacher").patch(chat.msgs("/" + UNKNOWN), json={"body": "x"}), 404)


def test_delete_rules(chat):
    pa, _ = make_platform_admin()
    owner, _ = make_platform_admin("Owner")
    pa.org(chat.org.id)
    owner.org(chat.org.id)
    msgs = [chat.post("Teacher", "m%d" % i) for i in range(6)]
    path = lambda m: chat.msgs("/" + m["id"])  # noqa: E731
    assert_error(chat.c("Coach").delete(path(msgs[0])), 403, "FORBIDDEN")  # not the sender
    assert_error(chat.c("Coach2").delete(path(msgs[0])), 403)
    for m, c in zip(msgs, (chat.c("Teacher"), chat.c("Manager"), chat.c("OrganizationAdmin"),
                           pa, owner)):
        r = c.delete(path(m))
        assert r.status_code == 204 and r.content == b"", r.text
        assert_error(c.delete(path(m)), 404, "NOT_FOUND")  # already deleted
    assert chat.ids() == [msgs[5]["id"]]
    assert psql_value("SELECT count(*) FROM chat_messages WHERE mentorship_id = :'m'"
                      " AND deleted_at IS NOT NULL AND deleted_by IS NOT NULL", m=chat.id) == "5"
    # A message of another mentorship is not found under this one.
    other = make_mentorship(chat.org, coach="Coach2", teacher="Teacher2")
    assert_error(chat.c("Teacher").delete(chat.msgs("/" + msgs[5]["id"], mid=other["id"])), 403)
    assert_error(chat.c("Manager").delete(chat.msgs("/" + msgs[5]["id"], mid=other["id"])), 404)


# ---- history pages -------------------------------------------------------------------------


def walk(chat, limit, key="Coach"):
    seen, before, pages = [], None, 0
    while True:
        q = {"limit": limit}
        if before:
            q["before"] = before
        page = chat.history(key, **q)
        pages += 1
        assert len(page["data"]) <= limit
        seen += page["data"]
        if page["data"]:
            assert page["meta"]["nextCursor"] == page["data"][-1]["createdAt"]
            assert ISO_US.match(page["meta"]["nextCursor"])
        if not page["meta"]["hasMore"]:
            return seen, pages
        assert len(page["data"]) == limit
        before = page["meta"]["nextCursor"]


def test_many_messages_in_one_millisecond_walked_page_by_page(chat):
    # 300 messages in 300 consecutive microseconds, some inside one millisecond for sure.
    ids = insert_messages(chat.id, chat.uid("Teacher"), ["m%03d" % i for i in range(300)],
                          base_sql="date_trunc('second', now()) - interval '1 hour'")
    assert psql_value("SELECT count(DISTINCT date_trunc('milliseconds', created_at))"
                      " FROM chat_messages WHERE mentorship_id = :'m'", m=chat.id) == "1"
    for limit in (1, 7, 20, 100):
        seen, pages = walk(chat, limit)
        assert [x["id"] for x in seen] == ids[::-1], limit
        assert pages == -(-300 // limit) + (1 if 300 % limit == 0 else 0) or \
            pages == -(-300 // limit)
    # The ordering is by time; times render with microseconds.
    seen, _ = walk(chat, 50)
    times = [parse_us(x["createdAt"]) for x in seen]
    assert times == sorted(times, reverse=True) and len(set(times)) == 300


def test_posts_in_a_burst_walked_page_by_page(chat):
    def send(i):
        return chat.post(("Coach", "Teacher")[i % 2], "b%d" % i)["id"]

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        posted = set(ex.map(send, range(60)))
    seen, _ = walk(chat, 9)
    assert [x["id"] for x in seen] == chat.ids(limit=100)
    assert set(x["id"] for x in seen) == posted and len(seen) == 60


def test_has_more_is_exact_and_limits(chat):
    ids = insert_messages(chat.id, chat.uid("Coach"), ["x%d" % i for i in range(40)])
    page = chat.history()
    assert len(page["data"]) == 20 and page["meta"]["hasMore"] is True  # default 20
    page2 = chat.history(limit=20, before=page["meta"]["nextCursor"])
    assert [x["id"] for x in page2["data"]] == ids[:20][::-1]
    assert page2["meta"]["hasMore"] is False  # exactly the limit was left
    page3 = chat.history(limit=20, before=page2["meta"]["nextCursor"])
    assert page3 == {"data": [], "meta": {"nextCursor": None, "hasMore": False}}
    assert len(chat.history(limit=100)["data"]) == 40
    assert len(chat.history(limit=1)["data"]) == 1
    for bad in ({"limit": 0}, {"limit": 101}, {"limit": "x"}, {"limit": "1.5"},
                {"before": "yesterday"}, {"before": "2026-13-01T00:00:00Z"}):
        assert_error(chat.c("Coach").get(chat.msgs(), params=bad), 400, "VALIDATION_ERROR")
    # A cursor in another notation names the same instant.
    cur = page["meta"]["nextCursor"]
    t = parse_us(cur).replace(tzinfo=datetime.timezone.utc)
    other = t.astimezone(datetime.timezone(datetime.timedelta(hours=2))).isoformat()
    assert chat.ids(before=other) == [x["id"] for x in page2["data"]] + []  # limit 20


# ---- access --------------------------------------------------------------------------------


def test_access_of_each_role(chat):
    pa, _ = make_platform_admin()
    owner, _ = make_platform_admin("Owner")
    pa.org(chat.org.id)
    owner.org(chat.org.id)
    m = chat.post("Coach", "hi")
    for key in ("Teacher", "Manager", "OrganizationAdmin"):
        chat.post(key, "from %s" % key)
    for c in (pa, owner):
        assert len(c.get_json(chat.msgs())["data"]) == 4  # they read
        assert_error(c.post(chat.msgs(), json={"body": "x"}), 403, "FORBIDDEN")  # not a participant
        assert_error(c.post(chat.msgs("/%s/reactions" % m["id"]), json={"emoji": "👍"}), 403)
        assert_error(c.patch(chat.path("/read-receipt"), json={"lastReadMessageId": m["id"]}),
                     403)
        assert_error(c.get(chat.path("/unread")), 403)
    for key in ("Coach2", "Teacher2"):
        c = chat.c(key)
        assert_error(c.get(chat.msgs()), 403, "FORBIDDEN")
        assert_error(c.post(chat.msgs(), json={"body": "x"}), 403)
        assert_error(c.get(chat.path("/unread")), 403)
        assert_error(c.post(chat.path("/token")), 403)
    other = new_org(roles=("OrganizationAdmin", "Manager", "Coach"))
    for key in ("OrganizationAdmin", "Manager", "Coach"):
        assert_error(other.client(key).get(chat.msgs()), 403, "FORBIDDEN")
        assert_error(other.client(key).post(chat.msgs(), json={"body": "x"}), 403)
    assert_error(chat.c("Coach").get(chat.msgs(mid=UNKNOWN)), 404, "NOT_FOUND")
    assert_error(chat.c("Coach").post(chat.msgs(mid=UNKNOWN), json={"body": "x"}), 404)
    assert_error(chat.c("Coach").get(chat.msgs(mid="not-a-uuid")), 400)
    anon = Client(org_id=chat.org.id)
    assert_error(anon.get(chat.msgs()), 401, "UNAUTHENTICATED")
    assert_error(anon.post(chat.msgs(), json={"body": "x"}), 401)
    assert_error(anon.get("/api/chat/conversations"), 401)
    # A disabled membership ends the access of a participant.
    chat.org.admin.patch_json("/api/organizations/%s/users/%s" % (chat.org.id, chat.uid("Manager")),
                              {"membershipStatus": "disabled"})
    assert chat.c("Manager").get(chat.msgs()).status_code in (400, 403)
    # An upper-case mentorship id names the same chat.
    assert len(chat.c("Coach").get_json(chat.msgs(mid=chat.id.upper()))["data"]) == 4
