"""The cache of rendered first history pages (routes/chat.c, migration 0011): a first page read
again after any change it shows (a post, an edit, a delete, reactions, attachments, a sender's
profile, a plain SQL write) shows the change, attachment urls are presigned per answer, and a
cached page is never shown to a caller without access."""
import pytest
import requests

from chat_fixtures import Chat, insert_messages
from helpers import assert_error, psql
from orgs import new_org


@pytest.fixture
def chat():
    return Chat()


def first_page(chat, key="Coach", **query):
    """The first page, read twice so that the second read can come from the cache; both agree
    (attachment urls aside: they are signed per answer)."""
    a = chat.history(key, **query)
    b = chat.history(key, **query)
    strip = lambda page: [dict(m, attachments=[dict(x, url=None) for x in m["attachments"]])
                          for m in page["data"]]
    assert strip(a) == strip(b) and a["meta"] == b["meta"]
    return b


def test_every_kind_of_message_write_shows(chat):
    m1 = chat.post("Coach", "first")
    assert [x["body"] for x in first_page(chat)["data"]] == ["first"]
    m2 = chat.post("Teacher", "second", replyToMessageId=m1["id"])
    page = first_page(chat)["data"]
    assert [x["id"] for x in page] == [m2["id"], m1["id"]]
    assert page[0]["replyTo"]["body"] == "first"
    chat.c("Coach").patch_json(chat.msgs("/" + m1["id"]), {"body": "first, edited"})
    page = first_page(chat)["data"]
    assert page[1]["body"] == "first, edited" and page[1]["editedAt"]
    assert page[0]["replyTo"]["body"] == "first, edited"  # the reply preview too
    chat.c("Teacher").post_json(chat.msgs("/%s/reactions" % m1["id"]), {"emoji": "👍"})
    assert first_page(chat)["data"][1]["reactions"] == [
        {"emoji": "👍", "count": 1, "userIds": [chat.uid("Teacher")]}]
    chat.c("Teacher").delete(chat.msgs("/%s/reactions/%s" % (m1["id"], "👍")))
    assert first_page(chat)["data"][1]["reactions"] == []
    chat.c("Coach").delete(chat.msgs("/" + m1["id"]))
    page = first_page(chat)["data"]
    assert [x["id"] for x in page] == [m2["id"]] and page[0]["replyTo"]["body"] is None


def test_sql_writes_and_limits_are_kept_apart(chat):
    chat.post("Coach", "api")
    assert len(first_page(chat)["data"]) == 1
    assert len(first_page(chat, limit=1)["data"]) == 1
    insert_messages(chat.id, chat.uid("Teacher"), ["sql one", "sql two"],
                    base_sql="now() + interval '1 second'")
    assert [x["body"] for x in first_page(chat)["data"]] == ["sql two", "sql one", "api"]
    one = first_page(chat, limit=1)
    assert [x["body"] for x in one["data"]] == ["sql two"] and one["meta"]["hasMore"] is True
    psql("UPDATE chat_messages SET body = 'changed' WHERE mentorship_id = :'m'"
         " AND body = 'api'", m=chat.id)
    assert first_page(chat)["data"][2]["body"] == "changed"


def test_sender_profile_changes_show(chat):
    m1 = chat.post("Coach", "hello")
    chat.post("Teacher", "reply", replyToMessageId=m1["id"])
    page = first_page(chat, key="Manager")["data"]
    assert page[1]["sender"]["firstName"] == "Carla" and page[0]["replyTo"]["senderName"] == \
        "Carla Coach"
    chat.c("Coach").patch_json("/api/users/me", {"firstName": "Carlota"})
    page = first_page(chat, key="Manager")["data"]
    assert page[1]["sender"]["firstName"] == "Carlota"
    assert page[0]["replyTo"]["senderName"] == "Carlota Coach"
    psql("UPDATE users SET email = 'renamed-' || email WHERE id = :'id'", id=chat.uid("Coach"))
    assert first_page(chat, key="Manager")["data"][1]["sender"]["email"].startswith("renamed-")


def test_attachments_show_with_urls_signed_per_answer(chat):
    coach = chat.c("Coach")
    chat.post("Coach", "no file yet")
    first_page(chat)
    p = coach.post_json("/api/files/presign", {"filename": "a.txt", "mimeType": "text/plain",
                                               "sizeBytes": 3})["data"]
    assert requests.put(p["presignedUrl"], data=b"abc",
                        headers={"Content-Type": "text/plain"}).status_code in (200, 204)
    fid = coach.post_json("/api/files/register", {
        "storageKey": p["storageKey"], "filename": "a.txt", "mimeType": "text/plain",
        "sizeBytes": 3}, expect=201)["data"]["fileId"]
    chat.post("Coach", "with file", attachmentIds=[fid])
    page = first_page(chat, key="Teacher")["data"]
    att = page[0]["attachments"][0]
    assert att["fileId"] == fid and "_key" not in att
    assert requests.get(att["url"]).content == b"abc"  # from a cached page: still a real url
    psql("UPDATE files SET filename = 'b.txt' WHERE id = :'id'", id=fid)
    assert first_page(chat, key="Teacher")["data"][0]["attachments"][0]["filename"] == "b.txt"


def test_cached_page_is_not_shown_without_access(chat):
    chat.post("Coach", "private")
    first_page(chat)
    for key in ("Coach2", "Teacher2"):
        assert_error(chat.c(key).get(chat.msgs()), 403, "FORBIDDEN")
    other = new_org(roles=("Manager",))
    assert_error(other.client("Manager").get(chat.msgs()), 403, "FORBIDDEN")
    # A participant who leaves the mentorship's organization loses it too.
    chat.org.admin.patch_json("/api/organizations/%s/users/%s" % (chat.org.id, chat.uid("Manager")),
                              {"membershipStatus": "disabled"})
    assert chat.c("Manager").get(chat.msgs()).status_code in (400, 403)
