"""Chat beyond posting: full-text search, reactions, read receipts and unread counts,
conversations, the chat events on both streams, push notifications and the RTM token."""
import datetime
import json
import os
import subprocess
import time
import urllib.parse
import uuid

import pytest

from chat_fixtures import Chat, insert_messages
from helpers import (Client, PushBox, RedisSub, SSEStream, assert_error, psql, psql_value,
                     redis_cli, second_coachd)
from ment_fixtures import add_push_token, make_mentorship
from orgs import make_platform_admin

HERE = os.path.dirname(os.path.abspath(__file__))
APP_ID = "970ca35de60c44645bbae8a215061b33"
APP_CERT = "5cfd2fd1755d40ecb72977518be15d3b"
UNKNOWN = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def chat():
    return Chat()


# ---- search --------------------------------------------------------------------------------


def test_search_english_and_spanish(chat):
    texts = {
        "es1": "Mañana tenemos la reunión del lunes",
        "es2": "Las REUNIONES de los viernes son largas",
        "es3": "Revisa la canción de Ángel",
        "en1": "The meeting moved to Thursday",
        "en2": "Two more meetings next week",
        "en3": "Homework is due on Monday",
        "mix": "Reunion with café owners",
    }
    ids = {k: chat.post("Coach" if i % 2 else "Teacher", t)["id"]
           for i, (k, t) in enumerate(texts.items())}

    def found(q, key="Coach"):
        page = chat.c(key).get_json(chat.msgs(), params={"q": q})
        assert page["meta"]["hasMore"] is False
        return {k for k, v in ids.items() if v in [x["id"] for x in page["data"]]}

    assert found("reunión") == {"es1", "es2", "mix"}  # accents ignored, plural by prefix
    assert found("REUN") == {"es1", "es2", "mix"}  # prefix, case-insensitive
    assert found("reunion") == {"es1", "es2", "mix"}
    assert found("cancion angel") == {"es3"}  # every word must match
    assert found("ÁNGEL") == {"es3"}
    assert found("cafe") == {"mix"}
    assert found("meeting") == {"en1", "en2"}
    assert found("meetings") == {"en1", "en2"}  # English stem
    assert found("meet") == {"en1", "en2"}
    assert found("mon") == {"en3"}
    assert found('"la reunion"') == {"es1"}  # a phrase
    assert found('"reunion la"') == set()
    assert found("reunion -lunes") == {"es2", "mix"}  # exclusion
    assert found("thursday or viernes") == {"en1", "es2"}
    assert found("nothing-like-this") == set()
    assert found("!!!") == set()
    # Newest first, deleted messages excluded, readers included.
    page = chat.c("Manager").get_json(chat.msgs(), params={"q": "reun"})
    assert [x["id"] for x in page["data"]] == [ids["mix"], ids["es2"], ids["es1"]]
    assert page["meta"] == {"nextCursor": None, "hasMore": False}
    chat.c("Teacher").delete(chat.msgs("/" + ids["mix"]))
    assert found("reun") == {"es1", "es2"}
    pa, _ = make_platform_admin()
    pa.org(chat.org.id)
    assert found("reun", key="Coach") == {"es1", "es2"}
    assert len(pa.get_json(chat.msgs(), params={"q": "reun"})["data"]) == 2
    assert_error(chat.c("Coach2").get(chat.msgs(), params={"q": "reun"}), 403)
    assert_error(chat.c("Coach").get(chat.msgs(), params={"q": "x" * 201}), 400)
    # A blank term is no search: the history answers.
    assert len(chat.history(q="   ")["data"]) == 6


def test_search_returns_at_most_50(chat):
    insert_messages(chat.id, chat.uid("Coach"), ["tarea número %d" % i for i in range(70)])
    page = chat.c("Coach").get_json(chat.msgs(), params={"q": "numero"})
    assert len(page["data"]) == 50 and page["meta"]["hasMore"] is False
    bodies = [x["body"] for x in page["data"]]
    assert bodies[0] == "tarea número 69" and bodies[-1] == "tarea número 20"
    page = chat.c("Coach").get_json(chat.msgs(), params={"q": "numero", "limit": 100})
    assert len(page["data"]) == 50
    page = chat.c("Coach").get_json(chat.msgs(), params={"q": "numero", "limit": 5})
    assert len(page["data"]) == 5


def test_search_beyond_the_newest_500(chat):
    """Search reads the newest 500 messages in order, then the index for older ones: matches
    on both sides of that edge come out newest first, without repeats, and a page the window
    fills alone needs nothing older."""
    bodies = ["relleno %d" % i for i in range(1300)]
    for i in (5, 150, 799, 800, 801, 1200, 1299):  # 800 is the oldest inside the window
        bodies[i] = "cometa %d" % i
    insert_messages(chat.id, chat.uid("Coach"), bodies)

    def found(**query):
        page = chat.c("Coach").get_json(chat.msgs(), params={"q": "cometa", **query})
        return [int(x["body"].split()[1]) for x in page["data"]]

    assert found() == [1299, 1200, 801, 800, 799, 150, 5]
    assert found(limit=4) == [1299, 1200, 801, 800]
    assert found(limit=6) == [1299, 1200, 801, 800, 799, 150]
    assert found(q="relleno", limit=3) == [1298, 1297, 1296]


# ---- reactions -----------------------------------------------------------------------------


def test_reactions_aggregate_and_are_idempotent(chat):
    m = chat.post("Teacher", "¡Aprobé!")
    rpath = chat.msgs("/%s/reactions" % m["id"])
    d = chat.c("Coach").post_json(rpath, {"emoji": "🎉"})["data"]
    assert d == {"messageId": m["id"],
                 "reactions": [{"emoji": "🎉", "count": 1, "userIds": [chat.uid("Coach")]}]}
    assert chat.c("Coach").post_json(rpath, {"emoji": "🎉"})["data"] == d  # idempotent
    chat.c("Teacher").post_json(rpath, {"emoji": "🎉"})
    chat.c("Manager").post_json(rpath, {"emoji": "👍🏽"})  # skin tone: 2 code points
    d = chat.c("Coach").post_json(rpath, {"emoji": "❤️"})["data"]
    assert d["reactions"] == [
        {"emoji": "🎉", "count": 2, "userIds": [chat.uid("Coach"), chat.uid("Teacher")]},
        {"emoji": "👍🏽", "count": 1, "userIds": [chat.uid("Manager")]},
        {"emoji": "❤️", "count": 1, "userIds": [chat.uid("Coach")]}]
    assert chat.history()["data"][0]["reactions"] == d["reactions"]
    # Removing: the caller's own only; an absent one is a no-op with the same answer.
    r = chat.c("Teacher").delete_json(rpath + "/" + urllib.parse.quote("🎉"))["data"]
    assert r["reactions"][0] == {"emoji": "🎉", "count": 1, "userIds": [chat.uid("Coach")]}
    again = chat.c("Teacher").delete_json(rpath + "/" + urllib.parse.quote("🎉"))["data"]
    assert again == r
    chat.c("Teacher").delete_json(rpath + "/" + urllib.parse.quote("😀"))
    chat.c("Coach").delete_json(rpath + "/" + urllib.parse.quote("🎉"))
    chat.c("Coach").delete_json(rpath + "/" + urllib.parse.quote("❤️"))
    assert chat.history()["data"][0]["reactions"] == [
        {"emoji": "👍🏽", "count": 1, "userIds": [chat.uid("Manager")]}]
    assert psql_value("SELECT count(*) FROM chat_reactions WHERE message_id = :'m'",
                      m=m["id"]) == "1"


def test_reaction_rules(chat):
    m = chat.post("Teacher", "hi")
    rpath = chat.msgs("/%s/reactions" % m["id"])
    for bad in ({}, {"emoji": ""}, {"emoji": "123456789"}, {"emoji": 1}, {"emoji": "a b"},
                {"emoji": " 👍"}, {"emoji": None}):
        assert_error(chat.c("Coach").post(rpath, json=bad), 400, "VALIDATION_ERROR")
    chat.c("Coach").post_json(rpath, {"emoji": "12345678"})  # 8 code points
    chat.c("Coach").post_json(rpath, {"emoji": "👨‍👩‍👧"})  # 5 code points (ZWJ sequence)
    assert_error(chat.c("Coach2").post(rpath, json={"emoji": "👍"}), 403)
    assert_error(chat.c("Coach").post(chat.msgs("/%s/reactions" % UNKNOWN),
                                      json={"emoji": "👍"}), 404)
    chat.c("Teacher").delete(chat.msgs("/" + m["id"]))
    assert_error(chat.c("Coach").post(rpath, json={"emoji": "👍"}), 404, "NOT_FOUND")
    assert_error(chat.c("Coach").delete(rpath + "/%F0%9F%91%8D"), 404)


# ---- read receipts and unread counts -------------------------------------------------------


def unread(chat, key):
    d = chat.c(key).get_json(chat.path("/unread"))
    assert d == {"data": {"mentorshipId": chat.id, "unreadCount": d["data"]["unreadCount"]}}
    return d["data"]["unreadCount"]


def receipt(chat, key, msg_id, expect=204):
    r = chat.c(key).patch(chat.path("/read-receipt"), json={"lastReadMessageId": msg_id})
    assert r.status_code == expect, r.text
    return r


def test_unread_counts_and_receipts(chat):
    assert unread(chat, "Coach") == 0
    t = [chat.post("Teacher", "t%d" % i) for i in range(4)]
    own = chat.post("Coach", "mine")
    assert unread(chat, "Coach") == 4  # the caller's own messages never count
    assert unread(chat, "Teacher") == 1
    assert unread(chat, "Manager") == 5
    r = receipt(chat, "Coach", t[1]["id"])
    assert r.content == b""
    assert unread(chat, "Coach") == 2
    receipt(chat, "Coach", t[0]["id"])  # never moves backwards
    assert unread(chat, "Coach") == 2
    assert psql_value("SELECT last_read_message_id FROM chat_read_receipts"
                      " WHERE mentorship_id = :'m' AND user_id = :'u'",
                      m=chat.id, u=chat.uid("Coach")) == t[1]["id"]
    chat.c("Teacher").delete(chat.msgs("/" + t[3]["id"]))  # deleted messages do not count
    assert unread(chat, "Coach") == 1
    assert unread(chat, "Manager") == 4
    receipt(chat, "Coach", own["id"])
    assert unread(chat, "Coach") == 0
    # The per-sender live counts behind the counts without a receipt match the messages.
    assert psql("SELECT sender_id, n FROM chat_counts WHERE mentorship_id = :'m' AND n > 0"
                " ORDER BY 1", m=chat.id) == sorted([(chat.uid("Coach"), "1"),
                                                    (chat.uid("Teacher"), "3")])
    receipt(chat, "Teacher", own["id"].upper())
    assert unread(chat, "Teacher") == 0
    # A receipt names a message of this mentorship.
    other = make_mentorship(chat.org, coach="Coach2", teacher="Teacher2")
    theirs = chat.c("Coach2").post_json(chat.msgs(mid=other["id"]), {"body": "x"},
                                        expect=201)["data"]
    assert_error(receipt(chat, "Coach", theirs["id"], 404), 404, "NOT_FOUND")
    assert_error(receipt(chat, "Coach", UNKNOWN, 404), 404)
    for bad in ({}, {"lastReadMessageId": None}, {"lastReadMessageId": "x"}):
        assert_error(chat.c("Coach").patch(chat.path("/read-receipt"), json=bad), 400)
    assert_error(chat.c("Coach2").patch(chat.path("/read-receipt"),
                                        json={"lastReadMessageId": t[0]["id"]}), 403)


# ---- conversations -------------------------------------------------------------------------


def test_conversations_per_role(chat):
    org = chat.org
    m2 = make_mentorship(org, coach="Coach", teacher="Teacher2", title=None)
    m3 = make_mentorship(org, coach="Coach2", teacher="Teacher")
    m4 = make_mentorship(org, coach="Coach2", teacher="Teacher2")  # only deleted messages
    a = chat.post("Teacher", "first")
    org.client("Coach").post_json(chat.msgs(mid=m2["id"]), {"body": "to teacher2"}, expect=201)
    org.client("Coach2").post_json(chat.msgs(mid=m3["id"]), {"body": "coach2 here"}, expect=201)
    gone = org.client("Coach2").post_json(chat.msgs(mid=m4["id"]), {"body": "oops"},
                                          expect=201)["data"]
    org.client("Coach2").delete(chat.msgs("/" + gone["id"], mid=m4["id"]))
    b = chat.post("Coach", "latest")
    c2 = chat.post("Teacher", "newest but deleted")
    chat.c("Teacher").delete(chat.msgs("/" + c2["id"]))

    coach = org.client("Coach").get_json("/api/chat/conversations")["data"]
    assert [x["mentorshipId"] for x in coach] == [chat.id, m2["id"]]
    first = coach[0]
    assert set(first) == {"mentorshipId", "mentorshipTitle", "mentorshipStatus", "otherUser",
                          "lastMessage", "unreadCount"}
    assert first["mentorshipTitle"] == "Física" and first["mentorshipStatus"] == "active"
    assert first["otherUser"] == {"id": chat.uid("Teacher"), "firstName": "Tom",
                                  "lastName": "Teacher",
                                  "email": org.users["Teacher"]["email"], "avatar": None}
    assert first["lastMessage"] == {"id": b["id"], "body": "latest",
                                    "senderId": chat.uid("Coach"), "createdAt": b["createdAt"]}
    assert first["unreadCount"] == 1  # "first"; "newest but deleted" is gone
    assert coach[1]["mentorshipTitle"] is None and coach[1]["unreadCount"] == 0
    assert coach[1]["otherUser"]["id"] == org.uid("Teacher2")

    teacher = org.client("Teacher").get_json("/api/chat/conversations")["data"]
    assert [x["mentorshipId"] for x in teacher] == [chat.id, m3["id"]]
    assert teacher[0]["otherUser"]["id"] == chat.uid("Coach")
    assert teacher[0]["unreadCount"] == 1 and teacher[1]["unreadCount"] == 1

    for key in ("Manager", "OrganizationAdmin"):
        allc = org.client(key).get_json("/api/chat/conversations")["data"]
        assert [x["mentorshipId"] for x in allc] == [chat.id, m3["id"], m2["id"]]
        assert [x["unreadCount"] for x in allc] == [2, 1, 1]
    receipt(chat, "Manager", b["id"])
    allc = org.client("Manager").get_json("/api/chat/conversations")["data"]
    assert [x["unreadCount"] for x in allc] == [0, 1, 1]
    pa, _ = make_platform_admin()
    pa.org(org.id)
    allc = pa.get_json("/api/chat/conversations")["data"]
    assert len(allc) == 3 and all(x["unreadCount"] == 0 for x in allc)
    # Another organization sees none of them.
    assert Chat().c("Manager").get_json("/api/chat/conversations")["data"] == []
    assert a["id"]


def test_conversation_last_message_follows_edits_and_deletes(chat):
    """The conversation list reads a stored last message: every change of the mentorship's
    messages (post, edit, soft delete, direct insert) must be reflected in it."""
    def last(key="Coach"):
        conv = [x for x in chat.c(key).get_json("/api/chat/conversations")["data"]
                if x["mentorshipId"] == chat.id]
        return conv[0]["lastMessage"] if conv else None

    a = chat.post("Teacher", "older")
    b = chat.post("Coach", "newer")
    assert last()["id"] == b["id"]
    chat.c("Coach").patch_json(chat.msgs("/" + b["id"]), {"body": "newer, edited"})
    assert last() == {"id": b["id"], "body": "newer, edited", "senderId": chat.uid("Coach"),
                      "createdAt": b["createdAt"]}
    chat.c("Coach").delete(chat.msgs("/" + b["id"]))
    assert last()["id"] == a["id"] and last("Manager")["body"] == "older"
    chat.c("Teacher").delete(chat.msgs("/" + a["id"]))
    assert last() is None  # no live message: not listed
    c = chat.post("Teacher", "back again")
    assert last() == {"id": c["id"], "body": "back again", "senderId": chat.uid("Teacher"),
                      "createdAt": c["createdAt"]}


# ---- events --------------------------------------------------------------------------------


def test_every_chat_event_on_every_channel(chat):
    participants = ("Coach", "Teacher", "Manager", "OrganizationAdmin")
    chans = ["mentorship:%s" % chat.id] + ["user:%s" % chat.uid(k) for k in participants]
    stranger = RedisSub("user:%s" % chat.uid("Coach2"), "user:%s" % chat.uid("Teacher2"))
    with stranger, RedisSub(*chans) as sub:
        def expect(event):
            got = [sub.next(event) for _ in chans]
            assert sorted(e["channel"] for e in got) == sorted(chans)
            # Each channel has its own id space: the event's id is its entry in the channel's
            # history (docs/api.md "Event ids, replay and reset").
            for e in got:
                key = "events:" + e["channel"]
                assert redis_cli("XRANGE", key, e["id"], e["id"]).split()[0] == e["id"]
            assert all(e["data"] == got[0]["data"] for e in got)
            return got[0]["data"]

        m = chat.post("Teacher", "hello")
        assert expect("chat-message") == m
        e = chat.c("Teacher").patch_json(chat.msgs("/" + m["id"]), {"body": "hello!"})["data"]
        upd = expect("chat-message-updated")
        assert upd == e and upd["editedAt"]
        rpath = chat.msgs("/%s/reactions" % m["id"])
        chat.c("Coach").post_json(rpath, {"emoji": "👍"})
        assert expect("chat-reaction-added") == {
            "messageId": m["id"], "userId": chat.uid("Coach"), "emoji": "👍",
            "reactions": [{"emoji": "👍", "count": 1, "userIds": [chat.uid("Coach")]}]}
        chat.c("Coach").post_json(rpath, {"emoji": "👍"})  # no change: no event
        chat.c("Coach").delete(rpath + "/" + urllib.parse.quote("👍"))
        assert expect("chat-reaction-removed") == {
            "messageId": m["id"], "userId": chat.uid("Coach"), "emoji": "👍", "reactions": []}
        chat.c("Coach").delete(rpath + "/" + urllib.parse.quote("👍"))  # absent: no event
        chat.c("Manager").delete(chat.msgs("/" + m["id"]))
        assert expect("chat-message-deleted") == {"id": m["id"], "mentorshipId": chat.id}
        # Failures publish nothing.
        chat.c("Manager").delete(chat.msgs("/" + m["id"]))
        chat.c("Coach2").post(chat.msgs(), json={"body": "intruder"})
        assert sub.drain(0.7) == []
        assert stranger.drain(0.1) == []
        assert stranger.messages(wait=0) == []


def test_chat_events_on_the_sse_streams(chat):
    with SSEStream(chat.c("Coach"), "/api/events/mentorships/%s/events" % chat.id) as ms, \
            SSEStream(chat.c("Teacher"), "/api/events/users/me/events") as us, \
            SSEStream(chat.c("Coach2"), "/api/events/users/me/events") as other:
        assert ms.status == us.status == other.status == 200
        time.sleep(0.3)  # the subscriptions are in place
        m = chat.post("Coach", "¿Lista para mañana?")
        for s in (ms, us):
            ev = s.next("chat-message")
            assert ev["data"]["id"] == m["id"] and ev["data"]["body"] == "¿Lista para mañana?"
            assert ev["data"]["sender"]["firstName"] == "Carla" and ev["id"]
        chat.c("Teacher").post_json(chat.msgs("/%s/reactions" % m["id"]), {"emoji": "👍"})
        chat.c("Coach").patch_json(chat.msgs("/" + m["id"]), {"body": "edited"})
        chat.c("Coach").delete(chat.msgs("/" + m["id"]))
        for s in (ms, us):
            assert s.next("chat-reaction-added")["data"]["emoji"] == "👍"
            assert s.next("chat-message-updated")["data"]["body"] == "edited"
            assert s.next("chat-message-deleted")["data"] == {"id": m["id"],
                                                              "mentorshipId": chat.id}
        other.no_event("chat-message", wait=0.5)


# ---- push ----------------------------------------------------------------------------------


def test_push_to_the_other_participants(chat, push):
    coach_tok = add_push_token(chat.uid("Coach"))
    teacher_tok = add_push_token(chat.uid("Teacher"))
    manager_tok = add_push_token(chat.uid("Manager"))
    body = "ñ" * 150 + "😀" * 60 + " tail"  # 215 code points
    m = chat.post("Teacher", body)
    msg = push.wait_for(coach_tok)
    assert msg["title"] == "Tom Teacher"
    assert msg["body"] == "ñ" * 150 + "😀" * 50  # the first 200 code points
    assert msg["data"] == {"type": "chat-message", "mentorshipId": chat.id, "messageId": m["id"]}
    time.sleep(0.5)
    everything = [x for x in PushBox().messages() if isinstance(x, dict)]
    assert not [x for x in everything if x.get("to") in (teacher_tok, manager_tok)]  # sender
    # A Manager's message reaches both the coach and the teacher.
    chat.post("Manager", "hola")
    assert push.wait_for(teacher_tok)["body"] == "hola"
    assert push.wait_for(coach_tok, count=2)["title"] == "Member Manager"
    time.sleep(0.3)
    assert not [x for x in PushBox().messages() if isinstance(x, dict) and
                x.get("to") == manager_tok]
    # No tokens, no outbox rows; the idempotent repeat queues nothing.
    cid = str(uuid.uuid4())
    chat.post("Coach", "again", clientMessageId=cid)
    chat.post("Coach", "again", clientMessageId=cid, expect=200)
    assert psql_value("SELECT count(*) FROM outbox WHERE kind = 'push'"
                      " AND payload->'data'->>'mentorshipId' = :'m'", m=chat.id) == "4"


# ---- chat token ----------------------------------------------------------------------------


def verify_token(token):
    assert os.path.isdir(os.path.join(HERE, "node_modules", "agora-token")), \
        "run `npm ci` in tests/api first (scripts/test does)"
    out = subprocess.run(["node", os.path.join(HERE, "verify_agora_token.js"), token, APP_CERT],
                         capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def test_chat_token_verified_independently(chat):
    pa, _ = make_platform_admin()
    pa.org(chat.org.id)
    for c, uid in [(chat.c(k), chat.uid(k)) for k in ("Coach", "Teacher", "Manager")] + \
            [(pa, pa.user["id"])]:
        t0 = int(time.time())
        d = c.post_json(chat.path("/token"))["data"]
        assert set(d) == {"appId", "token", "userId", "expiresAt"}
        assert d["appId"] == APP_ID and d["userId"] == uid and d["token"].startswith("007")
        v = verify_token(d["token"])
        assert v["parsed"] and v["signatureValid"] is True
        assert v["signatureValidWithWrongCert"] is False
        assert v["appId"] == APP_ID and abs(v["issueTs"] - t0) <= 5 and v["expire"] == 3600
        assert len(v["services"]) == 1
        rtm = v["services"][0]
        assert rtm["type"] == 2 and rtm["userId"] == uid
        assert rtm["privileges"] == {"1": 3600}
        expires = datetime.datetime.strptime(d["expiresAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        assert expires == v["issueTs"] + 3600
    assert_error(chat.c("Coach2").post(chat.path("/token")), 403)
    assert_error(chat.c("Coach").post(chat.path("/token", mid=UNKNOWN)), 404)
    assert_error(Client(org_id=chat.org.id).post(chat.path("/token")), 401)


def test_chat_token_unavailable_without_credentials(chat):
    with second_coachd(VIDEO_APP_ID=None, VIDEO_APP_CERTIFICATE=None) as base:
        c = Client(base_url=base, org_id=chat.org.id)
        c.cookies.update(chat.c("Coach").cookies)
        c.get_json(chat.msgs())  # the server works, only tokens are not configured
        err = assert_error(c.post(chat.path("/token")), 503, "UNAVAILABLE")
        assert err["message"] == ("Chat tokens are not configured: set VIDEO_APP_ID and "
                                  "VIDEO_APP_CERTIFICATE"), err
