#!/usr/bin/python3
"""Load for scripts/faults: THREADS threads sign up new users (each sign-up that answers 2xx
owes exactly one verification mail) and read GET /api/auth/session with one signed-in cookie,
until SIGTERM. Every answer is counted by phase (the text of PHASE_FILE when it was sent) and
status ("conn" for a connection error). On SIGTERM it writes OUT (JSON): the counts and the
addresses whose sign-up answered 2xx. Python standard library only."""
import argparse
import http.client
import json
import os
import signal
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--phase-file", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--threads", type=int, default=4)
ap.add_argument("--run", default=str(int(time.time())))
a = ap.parse_args()

stop = threading.Event()
lock = threading.Lock()
counts = {}  # phase -> {status: n}
signed_up = []
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


def request(method, path, body=None, cookie=None):
    conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=15)
    headers = {"Content-Type": "application/json"} if body is not None else {}
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
                               {"email": email, "password": "fault password 123", "name": "F"})
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


st, setc, _ = request("POST", "/api/auth/sign-up/email",
                      {"email": "fault-%s-reader@example.com" % a.run,
                       "password": "fault password 123", "name": "R"})
assert st == 200, st
signed_up.append("fault-%s-reader@example.com" % a.run)
cookie = setc.split(";")[0]
signal.signal(signal.SIGTERM, lambda *_: stop.set())
threads = [threading.Thread(target=signups) for _ in range(max(1, a.threads // 2))]
threads += [threading.Thread(target=sessions, args=(cookie,)) for _ in range(max(1, a.threads // 2))]
for t in threads:
    t.start()
while not stop.is_set():
    time.sleep(0.2)
for t in threads:
    t.join()
with open(a.out, "w") as f:
    json.dump({"counts": counts, "signed_up": signed_up}, f)
