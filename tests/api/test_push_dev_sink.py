"""Push in development without PUSH_URL (README.md, configuration): each batch is written under
PUSH_DIR as one .json file holding the exact body a POST to the push endpoint would carry, and
the outbox row counts as sent, as after a delivery. It runs on a second coachd with a database of
its own, so the test server (whose PUSH_URL is the push sink) never claims the rows queued here;
they are queued as the chat route queues a message's push (db/queries/chat.sql)."""
import glob
import json
import os
import re
import time
import uuid

import requests

from helpers import psql_at, second_coachd, temp_database

TOKEN = "metrics-secret-0123456789"


def wait_until(check, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.1)


def queue_push(url, tokens, title, body, data):
    payload = json.dumps({"to": tokens, "title": title, "body": body, "data": data})
    return psql_at(url, "INSERT INTO outbox (kind, payload) VALUES ('push', $$%s$$::jsonb) "
                        "RETURNING id" % payload)[0][0]


def outbox_depth(base):
    r = requests.get(base + "/metrics", headers={"Authorization": "Bearer " + TOKEN}, timeout=10)
    assert r.status_code == 200, r.text
    m = re.search(r"^coachd_outbox_depth (\S+)$", r.text, re.M)
    return float(m.group(1)) if m else None


def files(folder):
    return sorted(glob.glob(os.path.join(folder, "*.json")))


def test_development_without_push_url_writes_each_batch_as_a_json_file(tmp_path):
    folder = str(tmp_path / "push")  # created by coachd, parents and all
    with temp_database() as url, second_coachd(
            DATABASE_URL=url, APP_ENV="development", PUSH_URL=None, PUSH_ACCESS_TOKEN=None,
            PUSH_DIR=folder, METRICS_TOKEN=TOKEN) as base:
        tok = "ExponentPushToken[%s]" % uuid.uuid4().hex[:22]
        data = {"type": "chat-message", "mentorshipId": str(uuid.uuid4()),
                "messageId": str(uuid.uuid4())}
        row = queue_push(url, [tok], "Ana Pérez", "¿Nos vemos el martes?", data)
        [path] = wait_until(lambda: files(folder), what="a push file")
        with open(path, encoding="utf-8") as f:
            sent = json.load(f)
        # what a POST to Expo's endpoint would carry: one message per token
        assert sent == [{"to": tok, "title": "Ana Pérez", "body": "¿Nos vemos el martes?",
                         "data": data, "sound": "default"}]
        # written whole under a hidden name, then renamed: nothing half-written stays behind
        assert os.listdir(folder) == [os.path.basename(path)]
        # the row is sent, as after a delivery the endpoint accepted
        sent_row = wait_until(lambda: psql_at(
            url, "SELECT attempts, last_error IS NULL FROM outbox WHERE id = %s "
                 "AND sent_at IS NOT NULL" % row), what="the outbox row to be sent")
        assert sent_row == [("1", "t")]
        wait_until(lambda: outbox_depth(base) == 0, what="coachd_outbox_depth 0")

        # More than 100 tokens: one file per batch of at most 100 messages.
        many = ["ExponentPushToken[%s]" % uuid.uuid4().hex[:22] for _ in range(150)]
        queue_push(url, many, "t", "b", {"type": "x"})
        paths = wait_until(lambda: len(files(folder)) == 3 and files(folder), what="two batches")
        batches = []
        for p in paths:
            if p != path:
                with open(p, encoding="utf-8") as f:
                    batches.append(json.load(f))
        assert sorted(len(b) for b in batches) == [50, 100]
        assert sorted(m["to"] for b in batches for m in b) == sorted(many)
        wait_until(lambda: outbox_depth(base) == 0, what="coachd_outbox_depth 0")
        assert psql_at(url, "SELECT count(*) FROM outbox WHERE sent_at IS NULL") == [("0",)]
