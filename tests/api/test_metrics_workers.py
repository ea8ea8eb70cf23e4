"""/metrics answers for every worker (WORKERS > 1), whichever worker takes the scrape: a scraper's
keep-alive connection stays on one worker, so each worker's figures must reach the others. The
request counters and histograms are summed over the workers, per-worker gauges carry a
`worker` label, and METRICS_PORT serves /metrics (only) on a listener of its own without the
token. The answers are checked by `promtool check metrics` and by test_metrics.parse."""
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import requests

from helpers import free_port, second_coachd
from test_metrics import parse

TOKEN = "metrics-workers-0123456789"
UNMATCHED = '{method="GET",route="unmatched",status="404"}'


class Scraper:
    """One keep-alive connection, as Prometheus keeps one: it always reaches the same worker."""

    def __init__(self, port, token=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.headers = {"Authorization": "Bearer " + token} if token else {}
        self.sock = None
        self.count = 0

    def get(self, path="/metrics"):
        self.conn.request("GET", path, headers=self.headers)
        r = self.conn.getresponse()
        body = r.read().decode()
        if self.sock is None:
            self.sock = self.conn.sock
        # http.client reconnects silently when the server closed: that would prove nothing.
        assert self.conn.sock is self.sock, "the scrape connection was not kept alive"
        self.count += 1
        return r.status, body

    def scrape(self):
        status, body = self.get()
        assert status == 200, body
        return parse(body)[0], body

    def close(self):
        self.conn.close()


def by_worker(samples, name):
    """{worker slot: value} of a per-worker series (-1: a sample without the label)."""
    out = {}
    for labels, v in samples.get(name, []):
        m = re.search(r'worker="(\d+)"', labels)
        out[int(m.group(1)) if m else -1] = v
    return out


def promtool(text):
    assert shutil.which("promtool"), "promtool missing: apt-get install prometheus"
    out = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "", out.stdout


def wait_for(scraper, ok, what, seconds=10):
    """Scrapes on the same connection until ok(samples) holds (other workers publish their
    figures within a second); returns the samples and the text."""
    deadline = time.monotonic() + seconds
    while True:
        samples, text = scraper.scrape()
        if ok(samples):
            return samples, text
        assert time.monotonic() < deadline, "%s not seen within %d s; last scrape:\n%s" % (
            what, seconds, "\n".join(l for l in text.splitlines() if "unmatched" in l or
                                     "worker" in l))
        time.sleep(0.2)


def unmatched(samples):
    return dict(samples.get("coachd_http_requests_total", [])).get(UNMATCHED, 0)


def send_fresh(base, n):
    """n requests each on a new connection, so the kernel spreads them over the workers."""
    for i in range(n):
        r = requests.get(base + "/no/such/path/%d" % i, headers={"Connection": "close"},
                         timeout=10)
        assert r.status_code == 404


def test_one_scrape_counts_every_worker():
    n = 60
    mport = free_port()
    with second_coachd(WORKERS=2, METRICS_TOKEN=TOKEN) as base:
        main = Scraper(int(base.rsplit(":", 1)[1]), TOKEN)
        # Both workers report before the requests, so the per-worker deltas below are theirs.
        time.sleep(1.5)  # both workers have published what the start-up probes cost
        before, _ = main.scrape()
        per_before = by_worker(before, "coachd_worker_http_requests_total")
        scrapes_before = main.count
        send_fresh(base, n)
        # The main port's keep-alive scrape: the sum over both workers, not one worker's share.
        after, text = wait_for(main, lambda s: unmatched(s) >= n, "%d unmatched requests" % n)
        assert unmatched(after) == n, text
        per_after = by_worker(after, "coachd_worker_http_requests_total")
        assert sorted(per_after) == [0, 1], per_after
        # Both workers served some of the n requests: the one that does not take the scrapes
        # moved too. Every request since `before` is counted once: n plus the scrapes between.
        deltas = {w: per_after[w] - per_before.get(w, 0) for w in per_after}
        assert all(d >= 1 for d in deltas.values()), deltas
        assert sum(deltas.values()) == n + (main.count - scrapes_before), deltas
        pids = by_worker(after, "coachd_worker_pid")
        assert len(set(pids.values())) == 2 and all(p > 1 for p in pids.values()), pids
        assert dict(after["coachd_workers"])['{state="reporting"}'] == 2
        assert dict(after["coachd_workers"])['{state="missing"}'] == 0
        for name in ("coachd_redis_up", "coachd_http_connections", "coachd_streams_open",
                     "coachd_db_pool_queued", "process_resident_memory_bytes",
                     "process_open_fds", "coachd_offload_running"):
            assert sorted(by_worker(after, name)) == [0, 1], name
        assert all(v == 1 for v in by_worker(after, "coachd_redis_up").values())
        assert all(v > 1e6 for v in by_worker(after, "process_resident_memory_bytes").values())
        # Global figures once, without a worker label.
        for name in ("coachd_outbox_depth", "coachd_worker_restarts_total"):
            assert len(after[name]) == 1 and after[name][0][0] == "", after[name]
        # Histograms summed the same way: the counts of the unmatched route add up to n.
        count = dict(after["coachd_http_request_duration_seconds_count"])
        assert count['{method="GET",route="unmatched"}'] == n
        promtool(text)
        main.close()

    # The same sums on METRICS_PORT's listener, which needs no token.
    with second_coachd(WORKERS=2, METRICS_PORT=mport) as base:
        side = Scraper(mport)
        time.sleep(1.5)
        send_fresh(base, n)
        s, text = wait_for(side, lambda s: unmatched(s) >= n, "%d unmatched requests" % n)
        assert unmatched(s) == n, text
        assert len(by_worker(s, "coachd_worker_pid")) == 2
        promtool(text)
        side.close()


def test_metrics_port_serves_only_metrics():
    mport = free_port()
    with second_coachd(WORKERS=2, METRICS_PORT=mport, METRICS_TOKEN=None) as base:
        side = "http://127.0.0.1:%d" % mport
        r = requests.get(side + "/metrics", timeout=10)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith(
            "text/plain; version=0.0.4"), r.text
        # A stray bearer changes nothing there.
        assert requests.get(side + "/metrics", headers={"Authorization": "Bearer x"},
                            timeout=10).status_code == 200
        for path in ("/api/auth/session", "/api/health", "/metrics/x", "/"):
            r = requests.get(side + path, timeout=10)
            assert r.status_code == 404, (path, r.status_code)
        assert requests.options(side + "/api/auth/session", timeout=10).status_code == 404
        assert requests.post(side + "/metrics", json={}, timeout=10).status_code == 404
        # Without METRICS_TOKEN the main port keeps /metrics hidden.
        assert requests.get(base + "/metrics", timeout=10).status_code == 404
        assert requests.get(base + "/api/auth/session", timeout=10).status_code == 200

    # With METRICS_PORT, /metrics answers only there: the main port hides it even from the
    # token, so no proxy in front of the main port can pass it on.
    mport = free_port()
    with second_coachd(WORKERS=1, METRICS_PORT=mport, METRICS_TOKEN=TOKEN) as base:
        r = requests.get(base + "/metrics", headers={"Authorization": "Bearer " + TOKEN},
                         timeout=10)
        assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND", r.text
        assert requests.get(base + "/metrics", timeout=10).status_code == 404
        r = requests.get("http://127.0.0.1:%d/metrics" % mport, timeout=10)
        assert r.status_code == 200 and "coachd_worker_pid" in r.text
    with second_coachd(WORKERS=1, METRICS_TOKEN=TOKEN) as base:
        assert requests.get(base + "/metrics", timeout=10).status_code == 401
        r = requests.get(base + "/metrics", headers={"Authorization": "Bearer " + TOKEN},
                         timeout=10)
        assert r.status_code == 200 and "coachd_worker_pid" in r.text


def start_refused(**env):
    """Runs coachd serve with env; returns its stderr after asserting exit status 1."""
    full = dict(os.environ, PORT=str(free_port()), WORKERS="1")
    for var in ("DATABASE_URL", "REDIS_URL"):
        if os.environ.get("COACHD_" + var):
            full.setdefault(var, os.environ["COACHD_" + var])
    full.update({k: str(v) for k, v in env.items()})
    binary = os.environ.get("COACHD_BIN") or os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "coachd")
    out = subprocess.run([binary, "serve"], env=full, capture_output=True, text=True, timeout=30)
    assert out.returncode == 1, (env, out.returncode, out.stderr[-2000:])
    return out.stderr


def test_bad_metrics_port_refused():
    for value in ("80x", "0", "70000", "-1"):
        assert "METRICS_PORT" in start_refused(METRICS_PORT=value)
    # The main port itself is refused too: it could never be bound next to it.
    port = free_port()
    assert "METRICS_PORT" in start_refused(METRICS_PORT=port, PORT=port)
    assert "METRICS_HOST" in start_refused(METRICS_PORT=free_port(), METRICS_HOST="localhost")
    # A port another process holds: the supervisor refuses before forking, naming it.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        err = start_refused(METRICS_PORT=s.getsockname()[1])
        assert "METRICS_PORT" in err and "address already in use" in err, err


def test_replaced_worker_reports_and_counts_continue():
    n = 40
    mport = free_port()
    with second_coachd(WORKERS=2, METRICS_PORT=mport, allow_worker_death=True) as base:
        side = Scraper(mport)
        wait_for(side, lambda s: len(by_worker(s, "coachd_worker_pid")) == 2, "both workers")
        send_fresh(base, n)
        before, _ = wait_for(side, lambda s: unmatched(s) == n, "%d unmatched requests" % n)
        pids = by_worker(before, "coachd_worker_pid")
        side.close()
        victim_slot = 1
        victim = int(pids[victim_slot])
        # The pid belongs to this test's coachd (its environment names our METRICS_PORT), never
        # the suite's server.
        with open("/proc/%d/environ" % victim, "rb") as f:
            assert ("METRICS_PORT=%d" % mport).encode() in f.read().split(b"\0")
        os.kill(victim, signal.SIGKILL)

        def replaced(s):
            now = by_worker(s, "coachd_worker_pid")
            return (len(now) == 2 and now.get(victim_slot) not in (None, victim) and
                    dict(s["coachd_workers"])['{state="reporting"}'] == 2)

        deadline = time.monotonic() + 15
        while True:
            try:
                s = parse(requests.get("http://127.0.0.1:%d/metrics" % mport,
                                       timeout=5).text)[0]
                if replaced(s):
                    break
            except requests.ConnectionError:
                pass  # a connection the killed worker had accepted
            assert time.monotonic() < deadline, "no replacement reported within 15 s"
            time.sleep(0.2)
        new_pid = int(by_worker(s, "coachd_worker_pid")[victim_slot])
        assert os.path.exists("/proc/%d" % new_pid)
        assert s["coachd_worker_restarts_total"][0][1] == 1
        # The replacement continues its slot's counters: the sum never goes backwards (for
        # Prometheus that would be a counter reset of the whole sum).
        assert unmatched(s) == n, unmatched(s)
        count = dict(s["coachd_http_request_duration_seconds_count"])
        assert count['{method="GET",route="unmatched"}'] == n
