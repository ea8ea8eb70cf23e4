#!/usr/bin/env python3
"""SSE readers that never read, for scripts/bench/slowloris.sh: opens COUNT streams
(GET /api/events/users/me/events) with the sessions of USERS ("userId token" lines, from
seed_stream_users.sql; COUNT / users streams each, under the per-user cap of 20), from source
addresses 127.0.3.1, 127.0.3.2, ... (PER_ADDR each), with a 4 KiB receive buffer, and never
reads a byte. Meanwhile it publishes RATE events per second (SIZE bytes of data each) to the
users' channels on Redis, so every stream has data it does not take: the server's socket buffer
fills, then its write queue, until STREAM_MAX_PENDING closes the stream. A stream the server
closed (seen with poll's POLLRDHUP, which reads nothing) is opened again at once, as a hostile
client would; but the server's FIN waits behind the data the client does not take, so a client
that never reads mostly never learns of the close (the server's side sits in FIN-WAIT-1). With --read the same streams are read (a control run: what the events cost when
every reader keeps up). Runs until killed; prints the open count, reopenings and events published every
5 s. Python standard library only."""
import argparse
import itertools
import json
import select
import socket
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--users", required=True)
ap.add_argument("--count", type=int, default=1000)
ap.add_argument("--per-addr", type=int, default=200)
ap.add_argument("--redis", required=True, help="host:port")
ap.add_argument("--rate", type=float, default=200)
ap.add_argument("--size", type=int, default=2048)
ap.add_argument("--read", action="store_true",
                help="read everything after all (the control: the same streams, read)")
a = ap.parse_args()

users = [line.split() for line in open(a.users) if line.strip()]
per_user = -(-a.count // len(users))
if per_user > 20:
    sys.exit("need at least %d users for %d streams (20 per user)" % (-(-a.count // 20), a.count))
slots = [users[i // per_user] for i in range(a.count)]
poller = select.poll()
socks = {}  # fd -> (socket, slot)
reopened = 0


def open_one(i):
    uid, token = slots[i]
    n = i // a.per_addr
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
    s.bind(("127.0.3.%d" % (1 + n % 250), 0))
    s.connect(("127.0.0.1", a.port))
    s.sendall(("GET /api/events/users/me/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream"
               "\r\nCookie: auth.session_token=%s\r\n\r\n" % token).encode())
    socks[s.fileno()] = (s, i)
    poller.register(s, select.POLLRDHUP | select.POLLHUP | select.POLLERR |
                    (select.POLLIN if a.read else 0))


for i in range(a.count):
    open_one(i)
print("%d streams opened (%d per user), %s" % (a.count, per_user, "read" if a.read else "never read"),
      flush=True)

rhost, rport = a.redis.rsplit(":", 1)
redis = socket.create_connection((rhost, int(rport)))
redis_in = redis.makefile("rb")
pad = "x" * a.size
published = 0
seq = itertools.count(1)
next_report = time.monotonic() + 5
start = time.monotonic()


def publish(uid):
    msg = json.dumps({"id": "%d-stuck-%d" % (int(time.time() * 1000), next(seq)),
                      "event": "bench", "data": {"pad": pad}}, separators=(",", ":"))
    chan = "user:%s" % uid
    out = b"*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
        len(chan), chan.encode(), len(msg), msg.encode())
    redis.sendall(out)
    redis_in.readline()  # ":<receivers>"


while True:
    # Events due by now, spread over the users in turn.
    due = int((time.monotonic() - start) * a.rate)
    while published < due:
        publish(users[published % len(users)][0])
        published += 1
    for fd, ev in poller.poll(10):
        if a.read and ev == select.POLLIN:
            try:
                if socks[fd][0].recv(65536):
                    continue
            except OSError:
                pass
        s, i = socks.pop(fd)
        poller.unregister(fd)
        s.close()
        reopened += 1
        try:
            open_one(i)
        except OSError as e:
            print("reopen failed: %s" % e, flush=True)
    if time.monotonic() >= next_report:
        next_report += 5
        print("open %d reopened %d published %d" % (len(socks), reopened, published), flush=True)
