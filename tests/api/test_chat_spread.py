"""Posts of many mentorships go to PostgreSQL in one insert (routes/chat.c "posts",
db/coalesce.h): a group that fails is sent again post by post, so each post gets its own answer;
posts with attachments take the same path as plain ones."""
import concurrent.futures
import threading
import time
import uuid

import pytest

from chat_fixtures import Chat
from helpers import psql, psql_value
from test_chat_attachments import upload


@pytest.fixture(scope="module")
def chats():
    return [Chat() for _ in range(3)]


def wait_for(sql, at_least, **params):
    deadline = time.monotonic() + 10
    while int(psql_value(sql, **params)) < at_least:
        assert time.monotonic() < deadline, sql
        time.sleep(0.02)


def test_failing_group_across_mentorships_is_answered_per_post(chats):
    """While another transaction holds the clock rows of three mentorships, two inserts wait in
    PostgreSQL and the next posts, of all three, gather into one. That transaction deletes one
    post's reply target before it commits: the group's statement fails on the foreign key, and
    each of its posts is sent again alone. The one with the deleted target fails; every other
    post is created once, with its own body, and createdAt stays unique per mentorship."""
    parent = chats[0].post("Coach", "parent to be removed")
    ms = sorted(c.id for c in chats)
    holder = threading.Thread(target=psql, args=(
        "BEGIN; INSERT INTO chat_clocks SELECT m::uuid, now()"
        " FROM unnest(string_to_array(:'ms', ',')) m ORDER BY 1 ON CONFLICT (mentorship_id)"
        " DO UPDATE SET last_at = chat_clocks.last_at;"
        " DELETE FROM chat_messages WHERE id = :'p'; SELECT pg_sleep(1.5); COMMIT;",),
        kwargs={"ms": ",".join(ms), "p": parent["id"]})
    holder.start()
    wait_for("SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
             " AND query LIKE '%pg_sleep(1.5)%' AND pid <> pg_backend_pid()", 1)

    def send(args):
        i, chat, reply = args
        fields = {"body": "spread %d" % i, "clientMessageId": str(uuid.uuid4())}
        if reply:
            fields["replyToMessageId"] = reply
        r = chat.c("Coach").post(chat.msgs(), json=fields)
        return i, chat, reply, r.status_code, r.json()

    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        # Two posts take the two inserts in flight; they wait on the held clock rows. One at a
        # time: posts whose access reads come back in one loop turn share one insert.
        first = []
        for i in range(2):
            first.append(ex.submit(send, (i, chats[i], None)))
            wait_for("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                     " AND query LIKE '%chat_clocks%'", i + 1)
        # These gather behind them, of all three mentorships, one with the doomed reply target.
        rest = [ex.submit(send, (i, chats[i % 3], parent["id"] if i == 6 else None))
                for i in range(2, 14)]
        got = [f.result() for f in first + rest]
    holder.join()
    for i, chat, reply, status, body in got:
        if reply:
            assert status == 500, body
        else:
            assert status == 201, (i, body)
            assert body["data"]["body"] == "spread %d" % i
            assert body["data"]["mentorshipId"] == chat.id
    assert psql_value("SELECT count(*) FROM chat_messages WHERE body LIKE 'spread %%'"
                      " AND mentorship_id = ANY(string_to_array(:'ms', ',')::uuid[])",
                      ms=",".join(ms)) == "13"
    assert psql_value("SELECT count(*) FROM (SELECT mentorship_id, created_at FROM chat_messages"
                      " WHERE mentorship_id = ANY(string_to_array(:'ms', ',')::uuid[])"
                      " GROUP BY 1, 2 HAVING count(*) > 1) d", ms=",".join(ms)) == "0"


def test_attachments_and_plain_posts_together(chats):
    """Posts with attachments and without, of two mentorships, sent together: each answer
    carries its own files in its own order (with urls) or none, and the same post sent again
    by its clientMessageId is answered with the stored message, the same one."""
    files = {c.id: [upload(c.c("Coach"), b"file %d of %s" % (k, c.id.encode()),
                           filename="f%d.txt" % k) for k in range(2)] for c in chats[:2]}

    def send(i):
        chat = chats[i % 2]
        fields = {"body": "mixed %d" % i, "clientMessageId": str(uuid.uuid4())}
        if i % 3 == 0:
            fields["attachmentIds"] = files[chat.id][::-1] if i % 2 else files[chat.id]
        r = chat.c("Coach").post(chat.msgs(), json=fields)
        return chat, fields, r.status_code, r.json()["data"]

    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        got = list(ex.map(send, range(24)))
    for chat, fields, status, m in got:
        assert status == 201
        assert m["body"] == fields["body"] and m["mentorshipId"] == chat.id
        want = fields.get("attachmentIds", [])
        assert [a["fileId"] for a in m["attachments"]] == want
        assert all(a["url"] and a["filename"].startswith("f") for a in m["attachments"])
        again = chat.c("Coach").post(chat.msgs(), json=fields)
        assert again.status_code == 200
        a = again.json()["data"]
        # Urls are signed afresh for each answer; everything else is the stored message.
        for x in (a, m):
            for att in x["attachments"]:
                att.pop("url")
        assert a == m
