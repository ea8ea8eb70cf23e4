"""GET /api/health/live and /api/health/ready, the probes for load balancers and orchestrators:
no client key, no details; readiness follows the database, Redis and the migrations, never mail.
And the coachd_health_check_ok gauges of /metrics, which show mail trouble without a probe per
scrape."""
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from helpers import (MAIL_DIR, REDIS_URL, Client, free_port, psql_at, second_coachd,
                     temp_database, wait_until)

OK = {"status": "ok"}
DOWN = {"status": "unavailable"}
SCRAPE_TOKEN = "scrape-token-of-32-characters-at-least"  # production refuses a shorter one


def probe(base, path):
    r = Client(base_url=base, source_ip=False).get(path, timeout=5)
    return r.status_code, r.json()


def wait_until_ready(base):
    """A worker answers before its database and Redis connections are up (slower under the
    sanitizers), and is not ready until they are: that is what readiness is for."""
    wait_until(lambda: probe(base, "/api/health/ready") == (200, OK), timeout=15,
               what="ready 200 once the connections are up")


def test_live_and_ready_need_no_client_key():
    for path in ("/api/health/live", "/api/health/ready"):
        r = Client().get(path)
        assert r.status_code == 200, (path, r.text)
        assert r.json() == OK, (path, r.text)  # nothing else: no versions, no check names
    # /api/health keeps its client key.
    assert Client().get("/api/health").status_code == 401


def test_ready_follows_the_database(base_url, postgres_ctl):
    postgres_ctl("stop")
    wait_until(lambda: probe(base_url, "/api/health/ready") == (503, DOWN), timeout=20,
               what="ready 503 with PostgreSQL stopped")
    assert probe(base_url, "/api/health/live") == (200, OK)
    postgres_ctl("start")
    wait_until(lambda: probe(base_url, "/api/health/ready") == (200, OK), timeout=30,
               what="ready 200 with PostgreSQL back")


@pytest.fixture
def private_redis():
    """A Redis of this test's own on a free port: (port, start, stop)."""
    port = free_port()
    workdir = tempfile.mkdtemp()
    procs = []

    def start():
        p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", workdir],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)

        def up():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    return s.recv(16).startswith(b"+PONG")
            except OSError:
                return False
        wait_until(up, timeout=10, what="private redis")

    def stop():
        p = procs.pop()
        p.terminate()
        p.wait(timeout=10)

    yield port, start, stop
    while procs:
        stop()
    shutil.rmtree(workdir, ignore_errors=True)


def test_ready_follows_redis(private_redis):
    port, start, stop = private_redis
    start()
    with second_coachd(REDIS_URL="redis://127.0.0.1:%d/0" % port) as base:
        wait_until(lambda: probe(base, "/api/health/ready") == (200, OK), timeout=15,
                   what="ready 200")
        stop()
        wait_until(lambda: probe(base, "/api/health/ready") == (503, DOWN), timeout=15,
                   what="ready 503 with Redis stopped")
        assert probe(base, "/api/health/live") == (200, OK)
        start()
        wait_until(lambda: probe(base, "/api/health/ready") == (200, OK), timeout=20,
                   what="ready 200 with Redis back")


def test_ready_needs_the_migrations():
    with temp_database() as url, second_coachd(DATABASE_URL=url) as base:
        wait_until_ready(base)
        newest = psql_at(url, "SELECT max(version) FROM schema_migrations")[0][0]
        psql_at(url, "DELETE FROM schema_migrations WHERE version = '%s'" % newest)
        # A worker reuses its last answer for up to a second (the test below).
        wait_until(lambda: probe(base, "/api/health/ready") == (503, DOWN), timeout=5,
                   what="ready 503 without the newest migration")
        psql_at(url, "INSERT INTO schema_migrations (version) VALUES ('%s')" % newest)
        wait_until(lambda: probe(base, "/api/health/ready") == (200, OK), timeout=5,
                   what="ready 200 with every migration")


def test_a_flood_of_polls_costs_one_statement_at_a_time():
    """Readiness is public and not rate-limited, and its statement goes ahead of queued ones: a
    flood of polls must not put one statement each in front of real traffic. With the check's
    table locked, the check in flight waits; every other poll meanwhile gets the last answer at
    once instead of queueing a statement of its own behind the lock."""
    with temp_database() as url, second_coachd(DATABASE_URL=url, WORKERS=1) as base:
        wait_until_ready(base)
        time.sleep(1.2)  # the last answer is no longer reused by time alone
        locker = subprocess.Popen(
            ["psql", url, "-v", "ON_ERROR_STOP=1", "-c",
             "BEGIN; LOCK TABLE schema_migrations IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(4); COMMIT;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)  # the lock is held
            first = {}
            t = threading.Thread(target=lambda: first.update(r=probe(base, "/api/health/ready")))
            t.start()
            time.sleep(0.3)  # the first poll's statement waits on the lock
            t0 = time.monotonic()
            answers = [probe(base, "/api/health/ready") for _ in range(20)]
            took = time.monotonic() - t0
            assert answers == [(200, OK)] * 20, answers
            assert took < 2.0, "20 polls took %.1f s: each waited on a statement" % took
            t.join(timeout=10)
            assert first.get("r") == (200, OK), first
        finally:
            locker.wait(timeout=15)


class RefusingSmtp:
    """A port that accepts TCP connections and closes them at once (no SMTP greeting), counting
    them: an SMTP server that is down for coachd's mail check."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        self.sock.close()


def gauges(base, token):
    r = Client(base_url=base, source_ip=False).get(
        "/metrics", headers={"Authorization": "Bearer " + token})
    assert r.status_code == 200, r.text
    return dict(re.findall(r'^coachd_health_check_ok\{check="(\w+)"\} (\d+)$', r.text, re.M))


def test_mail_outage_keeps_ready_and_shows_in_health_and_metrics():
    smtp = RefusingSmtp()
    port = free_port()
    try:
        with second_coachd(PORT=port, APP_ENV="production", CLIENT_KEY="k",
                           PUBLIC_URL="http://127.0.0.1:%d" % port,
                           FRONTEND_URL="http://app.example", TRUSTED_ORIGINS="http://app.example",
                           MAIL_DIR=MAIL_DIR, SMTP_URL="smtp://127.0.0.1:%d" % smtp.port,
                           METRICS_TOKEN=SCRAPE_TOKEN) as base:
            # Scrapes show the mail check once a probe has answered; they start at most one
            # probe per cache period (30 s) however often Prometheus comes.
            seen = wait_until(lambda: "mail" in gauges(base, SCRAPE_TOKEN) and
                              gauges(base, SCRAPE_TOKEN), timeout=15, what="the mail gauge")
            assert seen["mail"] == "0", seen
            assert seen["database"] == "1" and seen["cache"] == "1", seen
            assert seen["storage"] == "1" and seen["video"] == "1", seen
            for _ in range(10):
                assert gauges(base, SCRAPE_TOKEN)["mail"] == "0"
                time.sleep(0.05)
            # The interface's /api/health: every check counts in production.
            r = Client(base_url=base, source_ip=False).get("/api/health",
                                                           headers={"X-Client-Key": "k"})
            assert r.status_code == 503, r.text
            body = r.json()
            assert body["status"] == "degraded" and body["checks"]["mail"] == "error", body
            assert body["checks"]["database"] == "ok" and body["checks"]["cache"] == "ok", body
            # The balancer's probe does not care about mail.
            for _ in range(5):
                assert probe(base, "/api/health/ready") == (200, OK)
            assert smtp.connections == 1, smtp.connections
    finally:
        smtp.close()


def test_probes_are_not_rate_limited():
    """A balancer polls from one address every second or so: the global per-IP limiter must not
    answer its probes 429 (the host would leave the pool as with an SMTP outage)."""
    with second_coachd(RATE_LIMITER_ENABLED="true", RATE_LIMITER_POINTS=3,
                       RATE_LIMITER_DURATION=60, REDIS_URL=REDIS_URL.rsplit("/", 1)[0] + "/8"
                       ) as base:
        wait_until_ready(base)
        c = Client(base_url=base)
        for _ in range(10):
            assert c.get("/api/health/ready").status_code == 200
            assert c.get("/api/health/live").status_code == 200
        # The limiter is on: an ordinary route from the same address is limited.
        statuses = [c.get("/api/auth/session").status_code for _ in range(5)]
        assert 429 in statuses, statuses
