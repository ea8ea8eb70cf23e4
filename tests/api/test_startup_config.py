"""Start-up refusals: bad configuration stops `coachd serve` with exit status 1 and a message
naming the variable, in the supervisor before any worker forks (the port never answers); a worker
that fails on start 5 times in a row stops the supervisor with exit status 1; LOG_FORMAT=json
makes every line JSON from the first."""
import json
import os
import random
import socket
import subprocess
import tempfile
import time
from urllib.parse import unquote, urlsplit

import pytest

from helpers import ROOT, free_port, second_coachd


def coachd_env(**extra):
    """The test server's environment, a free port on a loopback address of its own (so a
    server that wrongly starts on its default port 8080 is seen there and disturbs no one), one
    worker; values None unset the variable."""
    env = dict(os.environ)
    for var in ("DATABASE_URL", "REDIS_URL", "MAIL_DIR", "CLIENT_KEY"):
        if os.environ.get("COACHD_" + var):
            env.setdefault(var, os.environ["COACHD_" + var])
    env.update(PORT=str(free_port()), WORKERS="1",
               HOST="127.%d.%d.%d" % (random.randint(1, 254), random.randint(0, 255),
                                      random.randint(1, 254)))
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def answers(host, port):
    try:
        socket.create_connection((host, port), timeout=0.2).close()
        return True
    except OSError:
        return False


def run_coachd(env, timeout, watch_port=None):
    """Runs `coachd serve` until it exits or `timeout` seconds pass (then kills it). Returns
    (exit status or None when it had to be killed, stderr, whether watch_port ever answered)."""
    binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + timeout
        answered = False
        while proc.poll() is None and time.monotonic() < deadline:
            if watch_port and answers(env["HOST"], watch_port):
                answered = True
            time.sleep(0.02)
        rc = proc.poll()
        if rc is None:
            proc.kill()
            proc.wait()
        log.seek(0)
        return rc, log.read().decode("utf-8", "replace"), answered


# (variable named in the refusal, environment)
BAD = [
    ("PORT", {"PORT": "20o80"}),
    ("PORT", {"PORT": "70000"}),
    ("WORKERS", {"WORKERS": "two"}),
    ("REQUEST_TIMEOUT_SECONDS", {"REQUEST_TIMEOUT_SECONDS": "0"}),
    ("MAX_CONNECTIONS", {"MAX_CONNECTIONS": "10k"}),
    ("MAX_CONNECTIONS_PER_IP", {"MAX_CONNECTIONS_PER_IP": "-1"}),
    ("DATABASE_POOL_SIZE", {"DATABASE_POOL_SIZE": "100000"}),
    ("STREAM_WRITE_TIMEOUT_SECONDS", {"STREAM_WRITE_TIMEOUT_SECONDS": "1m"}),
    ("SHUTDOWN_GRACE_SECONDS", {"SHUTDOWN_GRACE_SECONDS": "30s"}),
    ("JANITOR_INTERVAL_SECONDS", {"JANITOR_INTERVAL_SECONDS": "0"}),
    ("HEALTH_PROBE_CACHE_SECONDS", {"HEALTH_PROBE_CACHE_SECONDS": "soon"}),
    ("DATABASE_URL", {"DATABASE_URL": "127.0.0.1:5432/coachd"}),
    ("REDIS_URL", {"REDIS_URL": "127.0.0.1:6379"}),
    ("REDIS_URL", {"REDIS_URL": "http://127.0.0.1:6379/0"}),
    ("REDIS_URL", {"REDIS_URL": "redis://127.0.0.1:6379/zero"}),
    ("SMTP_URL", {"SMTP_URL": "mail.example.com:25"}),
    ("PUBLIC_URL", {"PUBLIC_URL": "api.example.com"}),
    ("FRONTEND_URL", {"FRONTEND_URL": "ftp://app.example.com"}),
    ("TRUSTED_ORIGINS", {"TRUSTED_ORIGINS": "https://app.example.com,admin.example.com"}),
    ("S3_ENDPOINT", {"S3_ENDPOINT": "s3.example.com"}),
    ("PUSH_URL", {"PUSH_URL": "exp.host/--/api/v2/push/send"}),
    ("STORAGE_SECRET", {"APP_ENV": "production", "FRONTEND_URL": "https://app.example.com",
                        "STORAGE_SECRET": "too-short-for-production"}),
    # Guesses at it are never limited (403 before anything else): a short one is guessable.
    ("SETUP_TOKEN", {"APP_ENV": "production", "FRONTEND_URL": "https://app.example.com",
                     "SETUP_TOKEN": "letmein-setup"}),
    ("METRICS_TOKEN", {"APP_ENV": "production", "FRONTEND_URL": "https://app.example.com",
                       "METRICS_TOKEN": "scrape-me"}),
    # Production has no default for it: the email links would lead to this API's 404.
    ("FRONTEND_URL", {"APP_ENV": "production", "FRONTEND_URL": None}),
    ("LOG_LEVEL", {"LOG_LEVEL": "verbose"}),
    ("LOG_FORMAT", {"LOG_FORMAT": "xml"}),
    ("S3_FORCE_PATH_STYLE", {"S3_FORCE_PATH_STYLE": "maybe"}),
    ("SESSION_ABSOLUTE_DAYS", {"SESSION_ABSOLUTE_DAYS": "thirty"}),
    ("SESSION_ABSOLUTE_DAYS", {"SESSION_ABSOLUTE_DAYS": "0"}),
    ("SESSION_ABSOLUTE_DAYS", {"SESSION_ABSOLUTE_DAYS": "30d"}),
    # Past 30 s presence (60 s after the last ping) would lapse between pings.
    ("STREAM_PING_SECONDS", {"STREAM_PING_SECONDS": "31"}),
    ("STREAM_PING_SECONDS", {"STREAM_PING_SECONDS": "1"}),
    # Below 1 MiB not one large calendar feed would fit.
    ("CALENDAR_FEED_MEMORY_MAX", {"CALENDAR_FEED_MEMORY_MAX": "1048575"}),
    ("CALENDAR_FEED_MEMORY_MAX", {"CALENDAR_FEED_MEMORY_MAX": "64MiB"}),
]


@pytest.mark.parametrize("var,bad", BAD, ids=["%s=%s" % (v, list(b.values())[-1] or "unset")
                                              for v, b in BAD])
def test_bad_configuration_is_refused_before_any_worker(var, bad):
    env = coachd_env(**bad)
    # A malformed PORT used to fall back to 8080: watch that port then.
    port = 8080 if var == "PORT" else int(env["PORT"])
    rc, err, answered = run_coachd(env, timeout=10, watch_port=port)
    assert rc == 1, "exit status %s, expected 1:\n%s" % (rc, err[-3000:])
    refusals = [line for line in err.splitlines() if "config:" in line and var in line]
    assert refusals, "no message naming %s:\n%s" % (var, err[-3000:])
    assert "listening" not in err, err[-3000:]
    assert not answered, "port %d answered" % port
    if var in ("DATABASE_URL", "REDIS_URL", "SMTP_URL", "S3_ENDPOINT", "PUSH_URL", "SETUP_TOKEN",
               "METRICS_TOKEN"):
        # A service URL may carry a password, a token is one: the refusal names it without
        # echoing it.
        assert bad[var] not in err


def test_valid_configuration_of_the_same_variables_starts():
    """The checks above refuse only what is wrong: the well-formed spellings start."""
    with second_coachd(REQUEST_TIMEOUT_SECONDS=30, MAX_CONNECTIONS="1000",
                       MAX_CONNECTIONS_PER_IP=0, SHUTDOWN_GRACE_SECONDS=5,
                       PUBLIC_URL="https://api.example.com/", FRONTEND_URL="https://app.example.com",
                       TRUSTED_ORIGINS="https://app.example.com, http://[::1]:3000/",
                       S3_ENDPOINT="http://127.0.0.1:9", PUSH_URL="http://127.0.0.1:9/push",
                       S3_FORCE_PATH_STYLE="off", LOG_LEVEL="warning") as base:
        assert base


def test_database_url_in_libpq_key_value_form_starts():
    """libpq's other spelling of a connection (`host=... port=... dbname=...`) worked before the
    start-up checks and must go on working: only a value with neither form is refused."""
    u = urlsplit(os.environ["COACHD_DATABASE_URL"])
    conninfo = "host=%s port=%s dbname=%s" % (u.hostname, u.port or 5432, u.path.lstrip("/"))
    if u.username:
        conninfo += " user=%s" % unquote(u.username)
    if u.password:
        conninfo += " password=%s" % unquote(u.password)
    with second_coachd(DATABASE_URL=conninfo) as base:
        assert base


def test_worker_start_failures_stop_the_supervisor():
    """A worker that cannot start (here: MAIL_DIR cannot be created, which only the worker finds
    out) used to be replaced forever, the port open and nothing serving; after 5 failed starts in
    a row the supervisor exits 1. Its own lines are JSON too with LOG_FORMAT=json."""
    with tempfile.NamedTemporaryFile() as f:
        env = coachd_env(MAIL_DIR=os.path.join(f.name, "mail"), SMTP_URL=None, APP_ENV=None,
                         LOG_FORMAT="json")
        t0 = time.monotonic()
        rc, err, _ = run_coachd(env, timeout=40)
    took = time.monotonic() - t0
    assert rc == 1, "exit status %s after %.0f s, expected 1:\n%s" % (rc, took, err[-3000:])
    recs = [json.loads(line) for line in err.splitlines()]
    starts = [r for r in recs if "before it was ready" in r["msg"]]
    assert len(starts) == 5, err[-3000:]
    assert "5 failed starts in a row" in starts[-1]["msg"]
    assert any("MAIL_DIR" in r["msg"] or "cannot create" in r["msg"] for r in recs)


def test_json_logs_from_the_first_line():
    """LOG_FORMAT=json: every line is a JSON object, also those written while the configuration
    is read (an unknown LOG_LEVEL was reported as text before LOG_FORMAT was applied)."""
    rc, err, _ = run_coachd(coachd_env(LOG_FORMAT="json", LOG_LEVEL="loud"), timeout=10)
    lines = err.splitlines()
    assert lines
    for line in lines:
        rec = json.loads(line)  # raises on a text line
        assert {"time", "level", "pid", "msg"} <= rec.keys(), rec
    assert any("LOG_LEVEL" in json.loads(line)["msg"] for line in lines)
    assert rc == 1
