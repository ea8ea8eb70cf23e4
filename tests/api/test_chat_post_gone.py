"""A post whose client leaves while its insert waits for the inserts in flight (routes/chat.c,
db/coalesce.h "gone") is not inserted, those already sent are, and the worker goes on (no
sanitizer report). The inserts are held in PostgreSQL by a lock on the mentorship's clock row."""
import json
import re
import socket
import subprocess
import time
import uuid

import pytest

from chat_fixtures import Chat
from helpers import DATABASE_URL, psql_value, wait_until
from test_shutdown_grace import SANITIZER, Server


@pytest.fixture
def srv():
    s = Server()
    yield s
    s.close()


def send_post(srv, chat, key, body, cid):
    s = socket.create_connection(("127.0.0.1", srv.port))
    data = json.dumps({"body": body, "clientMessageId": cid}).encode()
    s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nCookie: auth.session_token=%s\r\n"
               "X-Organization-Id: %s\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n"
               % (chat.msgs(), chat.c(key).session_token, chat.org.id, len(data))).encode() + data)
    return s


def stored(cid):
    return psql_value("SELECT count(*) FROM chat_messages WHERE client_message_id = :'c'", c=cid)


def test_posts_whose_client_left_while_waiting_are_not_inserted(srv):
    chat = Chat()
    first = chat.c("Coach").post(srv.base + chat.msgs(),
                                 json={"body": "clock", "clientMessageId": str(uuid.uuid4())})
    assert first.status_code == 201, first.text
    # Holds the clock row: the inserts sent meanwhile wait in PostgreSQL.
    holder = subprocess.Popen(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DATABASE_URL],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    holder.stdin.write("BEGIN;\nSELECT 1 FROM chat_clocks WHERE mentorship_id = '%s' FOR UPDATE;\n"
                       % chat.id)
    holder.stdin.flush()
    wait_until(lambda: psql_value("SELECT count(*) FROM pg_locks l JOIN pg_class c ON "
                                  "c.oid = l.relation WHERE c.relname = 'chat_clocks' AND "
                                  "l.mode = 'RowShareLock'") != "0", what="clock row held")
    cids = [str(uuid.uuid4()) for _ in range(5)]
    socks = []
    # Two inserts in flight (each its own loop turn), then three that wait for them.
    for i, cid in enumerate(cids):
        socks.append(send_post(srv, chat, "Teacher", "post %d" % i, cid))
        if i < 2:
            time.sleep(0.5)
    time.sleep(0.5)
    for s in socks:
        s.close()
    time.sleep(0.5)
    holder.stdin.write("COMMIT;\n")
    holder.stdin.close()
    assert holder.wait(30) == 0, holder.stderr.read()
    wait_until(lambda: stored(cids[0]) == "1" and stored(cids[1]) == "1", what="sent inserts")
    after = chat.c("Coach").post(srv.base + chat.msgs(),
                                 json={"body": "after", "clientMessageId": str(uuid.uuid4())})
    assert after.status_code == 201, after.text
    assert [stored(c) for c in cids[2:]] == ["0", "0", "0"]
    assert srv.proc.poll() is None
    assert not re.search(SANITIZER, srv.text()), srv.text()[-3000:]
