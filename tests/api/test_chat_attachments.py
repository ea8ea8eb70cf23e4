"""Chat attachments: files the caller uploaded (at most 5), shown with a 15-minute download url
in the answer, the history and the event; other users' files 403, unknown ones 404. Sender
avatars that are uploaded images are shown as fresh urls too."""
import re
import time
import urllib.parse
import uuid

import pytest
import requests

from chat_fixtures import Chat
from helpers import RedisSub, assert_error, psql_value


@pytest.fixture
def chat():
    return Chat()


def upload(client, data, filename="notes.txt", mime="text/plain"):
    """presign + PUT + register through the files API; returns the file id."""
    p = client.post_json("/api/files/presign", {"filename": filename, "mimeType": mime,
                                                "sizeBytes": len(data)})["data"]
    r = requests.put(p["presignedUrl"], data=data, headers={"Content-Type": mime})
    assert r.status_code in (200, 204), r.text
    return client.post_json("/api/files/register", {
        "storageKey": p["storageKey"], "filename": filename, "mimeType": mime,
        "sizeBytes": len(data)}, expect=201)["data"]["fileId"]


def check_url(url, data, mime):
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    expires = int(q["e"][0])
    assert abs(expires - (time.time() + 900)) <= 10  # 15 minutes
    r = requests.get(url)
    assert r.status_code == 200 and r.content == data
    assert r.headers["Content-Type"].startswith(mime)


def test_attachments_with_urls(chat):
    coach = chat.c("Coach")
    f1 = upload(coach, b"first file", "plan.txt")
    f2 = upload(coach, b"%PDF-1.4 second", "informe.pdf", "application/pdf")
    with RedisSub("mentorship:%s" % chat.id) as sub:
        m = chat.post("Coach", "two files", attachmentIds=[f2, f1.upper()])
        ev = sub.next("chat-message")["data"]
    atts = m["attachments"]
    assert [a["fileId"] for a in atts] == [f2, f1]  # in the order sent
    assert set(atts[0]) == {"id", "fileId", "filename", "mimeType", "sizeBytes", "url"}
    assert (atts[0]["filename"], atts[0]["mimeType"], atts[0]["sizeBytes"]) == \
        ("informe.pdf", "application/pdf", 15)
    assert (atts[1]["filename"], atts[1]["mimeType"], atts[1]["sizeBytes"]) == \
        ("plan.txt", "text/plain", 10)
    uuid.UUID(atts[0]["id"])
    check_url(atts[0]["url"], b"%PDF-1.4 second", "application/pdf")
    check_url(atts[1]["url"], b"first file", "text/plain")
    assert [a["fileId"] for a in ev["attachments"]] == [f2, f1] and ev["attachments"][0]["url"]
    # The history shows them with fresh urls, to every reader.
    for key in ("Teacher", "Manager"):
        shown = chat.history(key)["data"][0]["attachments"]
        assert [a["id"] for a in shown] == [a["id"] for a in atts]
        check_url(shown[1]["url"], b"first file", "text/plain")
    # A file used by a message is not garbage: the row stays.
    assert psql_value("SELECT file_referenced(:'f')", f=f1) == "t"


def test_attachment_rules(chat):
    coach = chat.c("Coach")
    mine = [upload(coach, b"f%d" % i, "f%d.txt" % i) for i in range(6)]
    theirs = upload(chat.c("Teacher"), b"teacher's", "t.txt")
    r = coach.post(chat.msgs(), json={"body": "x", "attachmentIds": [mine[0], theirs]})
    assert_error(r, 403, "FORBIDDEN")
    r = coach.post(chat.msgs(), json={"body": "x", "attachmentIds": [str(uuid.uuid4())]})
    assert_error(r, 404, "NOT_FOUND")
    r = coach.post(chat.msgs(), json={"body": "x", "attachmentIds": mine})
    assert_error(r, 400, "VALIDATION_ERROR")
    r = coach.post(chat.msgs(), json={"body": "x", "attachmentIds": [mine[0], mine[0]]})
    assert_error(r, 400, "VALIDATION_ERROR")
    assert chat.ids() == []
    m = chat.post("Coach", "five", attachmentIds=mine[:5])
    assert len(m["attachments"]) == 5
    # The same file may go with several messages.
    chat.post("Coach", "again", attachmentIds=[mine[0]])
    assert chat.post("Coach", "none", attachmentIds=[])["attachments"] == []
    assert chat.post("Coach", "null", attachmentIds=None)["attachments"] == []


def test_uploaded_avatar_shown_as_url(chat):
    coach = chat.c("Coach")
    png = b"\x89PNG\r\n\x1a\n avatar"
    fid = upload(coach, png, "me.png", "image/png")
    coach.patch_json("/api/users/%s" % chat.uid("Coach"), {"avatar": fid})
    with RedisSub("mentorship:%s" % chat.id) as sub:
        chat.post("Coach", "with a face")
        check_url(sub.next("chat-message")["data"]["sender"]["avatar"], png, "image/png")
    sender = chat.history("Teacher")["data"][0]["sender"]
    assert sender["avatar"].startswith("http"), sender
    check_url(sender["avatar"], png, "image/png")
    conv = chat.c("Teacher").get_json("/api/chat/conversations")["data"][0]
    check_url(conv["otherUser"]["avatar"], png, "image/png")


def test_a_message_with_files_is_written_as_one_without(chat):
    """Attachment urls are put into the text PostgreSQL wrote, in the place of its "_key": the
    rest of a message with files is the same bytes as one without (PostgreSQL's lowercase
    escapes, "\\u001b", not a re-encoding's "\\u001B"), in the answer and the history."""
    coach = chat.c("Coach")
    fid = upload(coach, b"esc", "e.txt")
    shown = '"body":"esc \\u001b here"'
    with_file = coach.post(chat.msgs(), json={"body": "esc \x1b here", "attachmentIds": [fid]})
    without = coach.post(chat.msgs(), json={"body": "esc \x1b here"})
    for r in (with_file, without):
        assert r.status_code == 201 and shown in r.text, r.text
    for _ in range(2):  # the history's first page, rendered, then from the page cache
        assert chat.c("Teacher").get(chat.msgs()).text.count(shown) == 2
    att = re.search(r'"attachments":\[[^]]*\]', with_file.text).group(0)
    assert re.fullmatch(r'"attachments":\[\{"id":"[-0-9a-f]{36}","fileId":"%s","filename":'
                        r'"e.txt","mimeType":"text/plain","sizeBytes":3,"url":"http[^"]+"\}\]'
                        % fid, att), att
