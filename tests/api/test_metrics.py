"""GET /metrics: Prometheus text format behind METRICS_TOKEN, never public by default. The output
is checked by `promtool check metrics` (Debian's prometheus package) and by
a checker of the text format here too (names, labels, TYPE before samples, histogram buckets)."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
import requests

from helpers import Client, assert_error, second_coachd, sign_up

TOKEN = "metrics-secret-0123456789"
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABELS = r'\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,|(?=\})))*\}'
SAMPLE = re.compile(r"^(%s)(%s)? (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$" % (NAME, LABELS))


def parse(text):
    """Checks the exposition format and returns {name: [(labels, value)]}, {family: type}."""
    assert text.endswith("\n")
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            assert re.match(r"^# HELP %s .+$" % NAME, line), line
            continue
        if line.startswith("# TYPE "):
            m = re.match(r"^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$" % NAME, line)
            assert m, line
            assert m.group(1) not in types, "TYPE twice: " + line
            types[m.group(1)] = m.group(2)
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        name = m.group(1)
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or family in types, "sample before its TYPE: " + line
        samples.setdefault(name, []).append((m.group(2) or "", float(m.group(3))))
    for fam, t in types.items():
        if t != "histogram":
            continue
        by_series = {}
        for labels, v in samples.get(fam + "_bucket", []):
            key = re.sub(r',?le="[^"]*"', "", labels)
            by_series.setdefault(key, []).append(v)
        for key, counts in by_series.items():
            assert counts == sorted(counts), "buckets not cumulative: %s" % key
            total = [v for lab, v in samples[fam + "_count"] if lab == key]
            assert total == [counts[-1]], key
    return samples, types


def test_metrics_not_public_by_default():
    # The test server runs without METRICS_TOKEN.
    assert_error(Client().get("/metrics"), 404)


def test_metrics_content_and_format(tmp_path):
    with second_coachd(METRICS_TOKEN=TOKEN) as base:
        c = Client(base_url=base)
        err = assert_error(c.get("/metrics"), 401, "UNAUTHENTICATED")
        assert err["message"] == "Metrics need Authorization: Bearer <METRICS_TOKEN>", err
        assert_error(c.get("/metrics", headers={"Authorization": "Bearer wrong"}), 401,
                     "UNAUTHENTICATED")
        assert_error(c.get("/metrics", headers={"Authorization": "Bearer " + TOKEN + "x"}), 401)
        c.get("/api/auth/session")
        c.get("/api/auth/session")
        c.get("/no/such/path/123")
        r = c.get("/metrics", headers={"Authorization": "Bearer " + TOKEN})
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        samples, types = parse(r.text)
        reqs = dict(samples["coachd_http_requests_total"])
        # Route patterns label the series, never raw paths.
        assert reqs['{method="GET",route="/api/auth/session",status="200"}'] >= 2
        assert reqs['{method="GET",route="unmatched",status="404"}'] >= 1
        assert reqs['{method="GET",route="/metrics",status="401"}'] == 3
        assert "/no/such" not in r.text
        assert types["coachd_http_request_duration_seconds"] == "histogram"
        count = dict(samples["coachd_http_request_duration_seconds_count"])
        assert count['{method="GET",route="/api/auth/session"}'] >= 2
        for name in ("coachd_db_pool_queued", "coachd_db_pool_reconnects_total", "coachd_redis_up",
                     "coachd_outbox_depth", "coachd_outbox_oldest_age_seconds",
                     "coachd_streams_open", "coachd_offload_queued", "coachd_offload_running",
                     "process_resident_memory_bytes", "process_open_fds",
                     "coachd_worker_restarts_total", "coachd_worker_pid"):
            assert name in samples, name
        assert samples["coachd_redis_up"][0][1] == 1
        assert samples["process_resident_memory_bytes"][0][1] > 1e6
        assert samples["process_open_fds"][0][1] > 3
        assert types["coachd_worker_restarts_total"] == "counter"
        assert samples["coachd_worker_restarts_total"][0][1] == 0
        pool = dict(samples["coachd_db_pool_connections"])
        assert pool['{state="idle",worker="0"}'] + pool['{state="busy",worker="0"}'] >= 1
        # promtool comes with Debian's prometheus package (scripts/lib/deps.sh).
        assert shutil.which("promtool"), "promtool missing: apt-get install prometheus"
        out = subprocess.run(["promtool", "check", "metrics"], input=r.text, text=True,
                             capture_output=True, timeout=30)
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.strip() == "", out.stdout  # no lint findings either


def test_metrics_streams_and_pool_move():
    with second_coachd(METRICS_TOKEN=TOKEN) as base:
        c, _ = sign_up()
        c.base_url = base
        h = {"Authorization": "Bearer " + TOKEN}
        before = parse(requests.get(base + "/metrics", headers=h, timeout=10).text)[0]
        with c.get("/api/events/users/me/events", stream=True, timeout=10) as s:
            assert s.status_code == 200
            after = parse(requests.get(base + "/metrics", headers=h, timeout=10).text)[0]
        assert after["coachd_streams_open"][0][1] == before["coachd_streams_open"][0][1] + 1


def test_metrics_count_replaced_workers():
    """A worker killed with SIGKILL is replaced by the supervisor; the replacement reports one
    restart and its own pid (what tests/abuse/endings.py checks after every case)."""
    h = {"Authorization": "Bearer " + TOKEN}

    def scrape(base):
        s = parse(requests.get(base + "/metrics", headers=h, timeout=10).text)[0]
        return int(s["coachd_worker_pid"][0][1]), s["coachd_worker_restarts_total"][0][1]

    def kill_and_scrape_replacement(base, pid):
        """SIGKILLs worker pid and returns the first scrape answered by another worker."""
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while True:
            try:
                now = scrape(base)
                if now[0] != pid:
                    return now
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "no replacement of worker %d within 15 s" % pid
            time.sleep(0.1)

    with second_coachd(METRICS_TOKEN=TOKEN, allow_worker_death=True) as base:
        pid, restarts = scrape(base)
        assert restarts == 0
        # The pid is a coachd process whose parent is a coachd too (the supervisor), and not
        # this test's server (kill it, and the rest of the suite fails).
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            assert f.read().split(b"\0")[0].endswith(b"coachd"), pid
        with open("/proc/%d/stat" % pid) as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open("/proc/%d/cmdline" % ppid, "rb") as f:
            assert f.read().split(b"\0")[0].endswith(b"coachd"), ppid
        now = kill_and_scrape_replacement(base, pid)
        assert now[1] == 1, now
        assert os.path.exists("/proc/%d" % now[0])
        # The count is the supervisor's: it grows with each replacement.
        again = kill_and_scrape_replacement(base, now[0])
        assert again[1] == 2, again
