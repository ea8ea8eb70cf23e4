#!/usr/bin/env python3
"""Revocation latency of the caller-context cache across servers.

    scripts/bench/revocation.py WRITER_URL READER_URL DATABASE_URL [N]

WRITER_URL and READER_URL are two coachd processes (or workers) on the same database and Redis.
Creates N sessions (default 1000) of one user straight in the database (known tokens), then
for each: two requests on the reader (so its context is cached), sign-out on the writer, and
requests on the reader until it answers 401. Prints the distribution of the time from the
sign-out's reply to the reader's first refusal, and how many requests the reader still
accepted after the sign-out had replied (stale answers). Also prints the sign-out's own latency
(an invalidating write: it answers once every worker acknowledged the invalidation)."""
import hashlib
import http.client
import secrets
import subprocess
import sys
import time
import uuid
from urllib.parse import urlsplit


def conn(url):
    u = urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=10)


def call(c, method, path, token):
    c.request(method, path, body=b"{}" if method == "POST" else None,
              headers={"Cookie": "auth.session_token=" + token,
                       "Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    return r.status


def main():
    writer, reader, db = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    email = "revocation-%s@bench.test" % secrets.token_hex(4)
    tokens = [secrets.token_urlsafe(32) for _ in range(n)]
    uid = "crev" + secrets.token_hex(10)
    rows = ",\n".join("('%s', '%s', '%s', now() + interval '7 days')"
                      % (uuid.uuid4(), uid, hashlib.sha256(t.encode()).hexdigest())
                      for t in tokens)
    sql = ("INSERT INTO users (id, email, first_name, last_name) VALUES ('%s', '%s', 'Rev', 'Bench');\n"
           "INSERT INTO sessions (id, user_id, token_hash, expires_at) VALUES\n%s;\n"
           % (uid, email, rows))
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db], input=sql,
                   text=True, check=True)
    w, r = conn(writer), conn(reader)
    lat, stale, write = [], [], []
    for t in tokens:
        for _ in range(2):
            assert call(r, "GET", "/api/users/me", t) == 200
        sent = time.perf_counter()
        assert call(w, "POST", "/api/auth/sign-out", t) == 200
        done = time.perf_counter()
        write.append((done - sent) * 1000)
        k = 0
        while call(r, "GET", "/api/users/me", t) == 200:
            k += 1
            if time.perf_counter() - done > 5:
                raise SystemExit("session still accepted 5 s after sign-out")
        lat.append((time.perf_counter() - done) * 1000)
        stale.append(k)
    lat.sort()
    write.sort()

    def pct(p, v=lat):
        return v[min(len(v) - 1, int(p / 100 * len(v)))]

    print("revocations: %d" % n)
    print("time to refusal on the reader (ms): p50 %.2f  p90 %.2f  p99 %.2f  max %.2f"
          % (pct(50), pct(90), pct(99), lat[-1]))
    print("over 100 ms: %d" % sum(1 for x in lat if x > 100))
    print("sign-out latency (ms): p50 %.2f  p90 %.2f  p99 %.2f  max %.2f"
          % (pct(50, write), pct(90, write), pct(99, write), write[-1]))
    print("stale answers after the sign-out replied: %d revocations had any, %d in all, max %d"
          % (sum(1 for k in stale if k), sum(stale), max(stale)))


if __name__ == "__main__":
    main()
