#!/usr/bin/python3
"""Load for scripts/faults: THREADS threads sign up new users (each sign-up that answers 2xx
owes exactly one verification mail) and read GET /api/auth/session with one signed-in cookie,
until SIGTERM; with --chat (the JSON of scripts/lib/faults_setup.py) one more thread posts chat
messages in its mentorship, in turn as the coach and the teacher (each message owes one push
notification to the other's token). Every answer is counted by phase (the text of PHASE_FILE
when it was sent) and status ("conn" for a connection error). On SIGTERM it writes OUT (JSON):
the counts, the addresses whose sign-up answered 2xx, and the chat messages answered 2xx
({"id", "clientMessageId", "sender"}). Python standard library only."""
import argparse
import http.client
import json
import os
import signal
import threading
import time
import uuid

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--phase-file", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--threads", type=int, default=4)
ap.add_argument("--run", default=str(int(time.time())))
ap.add_argument("--chat")
a = ap.parse_args()

stop = threading.Event()
lock = threading.Lock()
counts = {}  # phase -> {status: n}
signed_up = []
chat_acked = []
seq = [0]


def phase():
    try:
        with open(a.phase_file) as f:
            return f.read().strip() or "?"
    except OSError:
        return "?"


def count(ph, status):
    with lock:
        c = counts.setdefault(ph, {})
        c[str(status)] = c.get(str(status), 0) + 1


def request(method, path, body=None, cookie=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=15)
    headers = dict(headers or {})
    if body is not None:
        headers["Content-Type"] = "application/json"
    if cookie:
        headers["Cookie"] = cookie
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=headers)
        r = conn.getresponse()
        data = r.read()
        return r.status, r.getheader("Set-Cookie"), data
    finally:
        conn.close()


def signups():
    while not stop.is_set():
        with lock:
            seq[0] += 1
            n = seq[0]
        email = "fault-%s-%d@example.com" % (a.run, n)
        ph = phase()
        try:
            st, _, _ = request("POST", "/api/auth/sign-up/email",
                               {"email": email, "password": "hydrant ladder 123", "name": "F"})
        except OSError:
            st = "conn"
        count(ph, st)
        if isinstance(st, int) and 200 <= st < 300:
            with lock:
                signed_up.append(email)
        if st != 200:
            time.sleep(0.05)


def sessions(cookie):
    while not stop.is_set():
        ph = phase()
        try:
            st, _, _ = request("GET", "/api/auth/session", cookie=cookie)
        except OSError:
            st = "conn"
        count(ph, st)
        if st != 200:
            time.sleep(0.05)


def chat(setup):
    path = "/api/mentorships/%s/chat/messages" % setup["mentorshipId"]
    org = {"X-Organization-Id": setup["organizationId"]}
    n = 0
    while not stop.is_set():
        n += 1
        sender = ("Coach", "Teacher")[n % 2]
        cid = str(uuid.uuid4())
        ph = phase()
        try:
            st, _, data = request("POST", path, {"body": "fault %s #%d" % (a.run, n),
                                                 "clientMessageId": cid},
                                  cookie=setup["people"][sender]["cookie"], headers=org)
        except OSError:
            st = "conn"
        count(ph, st)
        if isinstance(st, int) and 200 <= st < 300:
            with lock:
                chat_acked.append({"id": json.loads(data)["data"]["id"], "clientMessageId": cid,
                                   "sender": sender})
        time.sleep(0.05 if st == 201 else 0.2)


st, setc, _ = request("POST", "/api/auth/sign-up/email",
                      {"email": "fault-%s-reader@example.com" % a.run,
                       "password": "hydrant ladder 123", "name": "R"})
assert st == 200, st
signed_up.append("fault-%s-reader@example.com" % a.run)
cookie = setc.split(";")[0]
signal.signal(signal.SIGTERM, lambda *_: stop.set())
threads = [threading.Thread(target=signups) for _ in range(max(1, a.threads // 2))]
threads += [threading.Thread(target=sessions, args=(cookie,)) for _ in range(max(1, a.threads // 2))]
if a.chat:
    with open(a.chat) as f:
        threads.append(threading.Thread(target=chat, args=(json.load(f),)))
for t in threads:
    t.start()
while not stop.is_set():
    time.sleep(0.2)
for t in threads:
    t.join()
with open(a.out, "w") as f:
    json.dump({"counts": counts, "signed_up": signed_up, "chat_acked": chat_acked}, f)
