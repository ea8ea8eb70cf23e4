#!/usr/bin/env python3
"""Slow clients for scripts/bench/slowloris.sh: holds N connections that each send a request head
one byte every INTERVAL seconds (a slowloris), spread over source addresses 127.0.1.1,
127.0.1.2, ... (PER_ADDR connections each, so a per-address cap does not simply refuse them all).
A connection the server closes (its head deadline) is opened again at once, as an attacker would.
Runs until killed; prints how many are open (and how many the server closed) every 5 s."""
import argparse
import selectors
import socket
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--count", type=int, default=5000)
ap.add_argument("--per-addr", type=int, default=200)
ap.add_argument("--interval", type=float, default=10.0)
a = ap.parse_args()

HEAD = b"GET /api/auth/session HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000
sel = selectors.DefaultSelector()
socks = {}  # socket -> [bytes of HEAD sent, slot]
closed = 0


def open_one(i):
    src = "127.0.%d.%d" % (1 + (i // a.per_addr) // 250, 1 + (i // a.per_addr) % 250)
    s = socket.socket()
    s.setblocking(False)
    try:
        s.bind((src, 0))
        s.connect_ex(("127.0.0.1", a.port))
    except OSError as e:
        print("socket %d: %s" % (i, e), file=sys.stderr)
        s.close()
        return
    socks[s] = [0, i]
    sel.register(s, selectors.EVENT_READ)


for i in range(a.count):
    open_one(i)
print("opened %d" % len(socks), flush=True)
last_report = 0.0
while True:
    t0 = time.time()
    for s in list(socks):
        try:
            st = socks[s]
            s.send(HEAD[st[0]:st[0] + 1])
            st[0] = (st[0] + 1) % len(HEAD)
        except OSError:
            pass
    deadline = t0 + a.interval
    while time.time() < deadline:
        for key, _ in sel.select(timeout=max(0.0, min(1.0, deadline - time.time()))):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                s.close()
                slot = socks.pop(s)[1]
                closed += 1
                open_one(slot)
        if time.time() - last_report >= 5:
            last_report = time.time()
            print("open %d closed-by-server %d" % (len(socks), closed), flush=True)
