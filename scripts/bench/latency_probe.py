#!/usr/bin/env python3
"""Latency of light requests while something else loads the server: one keep-alive connection
sends GET requests at a fixed rate (an open loop: a slow answer does not delay the schedule, so
a stall shows in full) and prints the latency distribution.

    latency_probe.py URL [--rate 200] [--after 0] [--seconds 10]

--after waits before the first request (to start inside a benchmark's busy phase). The line it
prints: requests, non-2xx answers, and p50 / p90 / p99 / max latency in ms, each measured from
the request's scheduled time."""
import argparse
import http.client
import time
from urllib.parse import urlsplit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--after", type=float, default=0.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    u = urlsplit(a.url)
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    time.sleep(a.after)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
    lat, bad = [], 0
    start = time.monotonic()
    n = int(a.rate * a.seconds)
    for i in range(n):
        due = start + i / a.rate
        now = time.monotonic()
        if now < due:
            time.sleep(due - now)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            r.read()
            if not 200 <= r.status < 300:
                bad += 1
        except (OSError, http.client.HTTPException):
            bad += 1
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
        # From the scheduled time: a request that could not start on time waited for the server.
        lat.append((time.monotonic() - due) * 1000)
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, int(p / 100 * len(lat)))]

    print("probe %s: %d requests at %.0f/s, non-2xx %d, p50 %.2f / p90 %.2f / p99 %.2f / max %.2f ms"
          % (path, len(lat), a.rate, bad, pct(50), pct(90), pct(99), lat[-1]))


if __name__ == "__main__":
    main()
