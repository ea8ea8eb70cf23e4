#!/usr/bin/env python3
"""Memory a worker spends on Last-Event-ID replays to clients that read nothing (docs/security.md,
"Streams"), against a running coachd:

    scripts/bench/replay_memory.py --base http://127.0.0.1:58181 --pid PID \\
        --database-url postgres://... --redis 127.0.0.1:55379 [--metrics-token T]

Seeds one coach in a mentorship with seed_replay_memory.sql (psql), empties the coach's event
history in Redis, posts MESSAGES (1,050) chat messages of 4,000 x "€" (~12 KB per event; just
under EVENT_HISTORY_MAX + 100, so the history is not trimmed), then ROUNDS (2) times opens the
user's STREAMS (20, STREAM_MAX_PER_USER) user streams with `Last-Event-ID: 0-1` on sockets with
a 4 KiB receive window, reads nothing for SECONDS (5), samples the worker's RSS (VmRSS of PID, or
of its first child when PID is the master) and, with --metrics-token, coachd_replay_pending_bytes,
and closes them (the next round is the reconnect). Prints one line per round and the RSS growth
over the idle RSS before the first. Python standard library only."""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True, help="coachd's URL (one worker: WORKERS=1)")
ap.add_argument("--pid", type=int, required=True, help="coachd's pid (master or worker)")
ap.add_argument("--database-url", required=True)
ap.add_argument("--redis", required=True, help="host:port of coachd's Redis")
ap.add_argument("--metrics-token", help="METRICS_TOKEN, to sample coachd_replay_pending_bytes")
ap.add_argument("--messages", type=int, default=1050)
ap.add_argument("--streams", type=int, default=20)
ap.add_argument("--seconds", type=float, default=5)
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--threads", type=int, default=8, help="parallel posts")
a = ap.parse_args()

here = os.path.dirname(os.path.abspath(__file__))
u = urlsplit(a.base)
host, port = u.hostname, u.port or 80


def worker_pid(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = f.read().split()
        return int(kids[0]) if kids else pid
    except OSError:
        return pid


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def redis(*args):
    rh, rp = a.redis.rsplit(":", 1)
    with socket.create_connection((rh, int(rp)), 5) as s:
        out = b"*%d\r\n" % len(args)
        for x in args:
            x = x.encode() if isinstance(x, str) else x
            out += b"$%d\r\n%s\r\n" % (len(x), x)
        s.sendall(out)
        return s.recv(4096)


def gauge(name):
    if not a.metrics_token:
        return None
    c = http.client.HTTPConnection(host, port, timeout=10)
    c.request("GET", "/metrics", headers={"Authorization": "Bearer " + a.metrics_token})
    text = c.getresponse().read().decode()
    c.close()
    # One line per worker (name{worker="slot"} value): their sum.
    found = [float(line.split()[-1]) for line in text.splitlines()
             if line.startswith(name + " ") or line.startswith(name + "{")]
    return sum(found) if found else None


seed = subprocess.run(["psql", "-X", "-q", "-At", "-d", a.database_url, "-f",
                       os.path.join(here, "seed_replay_memory.sql")],
                      capture_output=True, text=True, check=True).stdout.split()
user_id, token, mentorship, org = seed[-4:]
redis("DEL", "events:user:" + user_id)
worker = worker_pid(a.pid)

body = json.dumps({"body": "€" * 4000})
headers = {"Content-Type": "application/json", "Cookie": "auth.session_token=" + token,
           "X-Organization-Id": org}
left = list(range(a.messages))
lock = threading.Lock()
failures = []


def poster():
    c = http.client.HTTPConnection(host, port, timeout=30)
    while True:
        with lock:
            if not left:
                break
            left.pop()
        c.request("POST", "/api/mentorships/%s/chat/messages" % mentorship, body=body,
                  headers=headers)
        r = c.getresponse()
        r.read()
        if r.status != 201:
            failures.append(r.status)
    c.close()


t0 = time.monotonic()
ts = [threading.Thread(target=poster) for _ in range(a.threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
if failures:
    sys.exit("posts failed: %s" % failures[:5])
print("posted %d messages of 4,000 x '€' in %.1f s; history entries in Redis: %s"
      % (a.messages, time.monotonic() - t0,
         redis("XLEN", "events:user:" + user_id).decode().strip(":\r\n")))

time.sleep(1)
base_rss = rss_kb(worker)
print("worker %d idle RSS %.1f MB" % (worker, base_rss / 1024))
for rnd in range(1, a.rounds + 1):
    socks = []
    for _ in range(a.streams):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((host, port))
        s.sendall(("GET /api/events/users/me/events HTTP/1.1\r\nHost: x\r\n"
                   "Accept: text/event-stream\r\nLast-Event-ID: 0-1\r\n"
                   "Cookie: auth.session_token=%s\r\n\r\n" % token).encode())
        socks.append(s)
    start_rss = rss_kb(worker)
    peak_rss, peak_gauge = start_rss, None
    t_end = time.monotonic() + a.seconds
    while time.monotonic() < t_end:
        peak_rss = max(peak_rss, rss_kb(worker))
        g = gauge("coachd_replay_pending_bytes")
        if g is not None:
            peak_gauge = max(peak_gauge or 0.0, g)
        time.sleep(0.1)
    end_rss = rss_kb(worker)
    print("round %d: %d streams, Last-Event-ID 0-1, nothing read for %.0f s: worker RSS %.1f -> "
          "%.1f MB (peak %.1f MB), +%.1f MB over idle%s"
          % (rnd, a.streams, a.seconds, start_rss / 1024, end_rss / 1024, peak_rss / 1024,
             (peak_rss - base_rss) / 1024,
             "" if not a.metrics_token else "; coachd_replay_pending_bytes not in /metrics"
             if peak_gauge is None else
             "; coachd_replay_pending_bytes peak %.2f MB" % (peak_gauge / 1048576)))
    for s in socks:
        s.close()
    time.sleep(1)
print("after closing: worker RSS %.1f MB (+%.1f MB over idle)"
      % (rss_kb(worker) / 1024, (rss_kb(worker) - base_rss) / 1024))
