#!/usr/bin/python3
"""The deployment test's checks (scripts/deploy-test starts PostgreSQL and Redis and builds
coachd, then runs this). Each check proves one finding of the production-operations review and
prints "PASS|FAIL [finding] what"; the last line is "N passed, N failed".

What runs here, all on loopback, all stopped at the end:
- a self-signed certificate (openssl) in a temporary folder;
- nginx (Debian's) as a non-daemon in a private prefix, with deploy/nginx.conf as shipped, but
  for the mechanical substitutions of NGINX_RENDER (ports, certificate, log folder, upstream):
  each one must match its line exactly once, so a change to the shipped file that they no longer
  fit fails the test instead of testing something else;
- an SMTP sink (tests/api/smtp_sink.py);
- coachd serve, WORKERS=2, with the environment of deploy/coachd.env.example, parsed as systemd
  does, where only the values of ENV_OVERRIDES are replaced (addresses, secrets, ports) and
  ENV_ADDED set (commented-out settings the test turns on).

Findings (names used in every line):
  F1 health     /api/health/ready for balancers: no client key, mail down does not fail it
  F2 proxy      TRUSTED_PROXIES: one client's wrong sign-ins do not block another; client address
                in coachd's access log
  F3 first-run  the HTTP first-run refused through the proxy without SETUP_TOKEN; coachd first-run
  F4 metrics    METRICS_PORT answers for both workers
  F5 shutdown   SIGTERM during an upload: it finishes within SHUTDOWN_GRACE_SECONDS, exit 0
  F6 config     the example with its CHANGE_ME secrets is refused at start, naming the variable
  F7 systemd    deploy/coachd.service passes systemd-analyze verify
  F8 logs       nginx's log without query strings, with $request_id; coachd's JSON from line one
  F9 docs       deploy/ works as shipped: nginx TLS, redirect, streams, 20 MB upload, Secure cookies,
                env example complete and readable by systemd and sh, database rights, promtool

Environment (set by scripts/deploy-test): COACHD_BIN, COACHD_ROOT, DEPLOY_DATABASE_URL,
DEPLOY_REDIS_URL, DEPLOY_HTTPS_PORT, DEPLOY_HTTP_PORT, DEPLOY_COACHD_PORT, DEPLOY_METRICS_PORT,
DEPLOY_SMTP_PORT, DEPLOY_LOGS (folder that keeps nginx's and coachd's logs after the run).
"""
import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import requests
from requests.adapters import HTTPAdapter

ROOT = os.environ["COACHD_ROOT"]
BIN = os.environ["COACHD_BIN"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port(var):
    """The port asked for, or a free one when it cannot be bound right now: the asked ports may
    lie in the kernel's ephemeral range, where another program's outgoing connection (or its
    TIME-WAIT) can hold them for a while."""
    want = int(os.environ[var])
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", want))
        return want
    except OSError:
        got = free_port()
        print("     . %s=%d cannot be bound now; using %d" % (var, want, got), flush=True)
        return got


HTTPS_PORT = port("DEPLOY_HTTPS_PORT")
HTTP_PORT = port("DEPLOY_HTTP_PORT")
COACHD_PORT = port("DEPLOY_COACHD_PORT")
METRICS_PORT = port("DEPLOY_METRICS_PORT")
SMTP_PORT = port("DEPLOY_SMTP_PORT")
LOGS = os.environ["DEPLOY_LOGS"]
DEPLOY = os.path.join(ROOT, "deploy")
BASE = "https://127.0.0.1:%d" % HTTPS_PORT
PASSWORD = "correct horse battery"
CLIENT_KEY = secrets.token_hex(16)
SETUP_TOKEN = secrets.token_hex(24)

results = []  # (ok, finding, text)
procs = {}  # name -> Popen, stopped at the end


def check(finding, text, ok, detail=""):
    ok = bool(ok)
    results.append((ok, finding, text))
    line = "%s [%s] %s" % ("PASS" if ok else "FAIL", finding, text)
    if not ok and detail:
        line += "\n      " + str(detail).replace("\n", "\n      ")[:1500]
    print(line, flush=True)
    return ok


def note(text):
    print("     . " + text, flush=True)


# ---- environment file ----------------------------------------------------------------------

def parse_env_systemd(text):
    """KEY=VALUE lines as systemd's EnvironmentFile= reads them: '#' or ';' starts a comment
    line, whitespace around the line is dropped, a value wholly in double quotes is unquoted
    (backslash escapes), in single quotes taken literally; anything else is taken as written,
    a trailing '# ...' included."""
    env = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, sep, val = line.partition("=")
        if not sep:
            continue
        key, val = key.strip(), val.strip()
        if len(val) >= 2 and val[0] == val[-1] == '"':
            val = re.sub(r"\\(.)", r"\1", val[1:-1])
        elif len(val) >= 2 and val[0] == val[-1] == "'":
            val = val[1:-1]
        env[key] = val
    return env


def parse_env_sh(path):
    """The same file as `set -a; . FILE` in sh sees it (what an operator runs by hand)."""
    out = subprocess.run(["env", "-i", "/bin/sh", "-c", "set -a; . \"$1\"; exec env -0", "sh", path],
                         capture_output=True, check=True).stdout
    env = {}
    for item in out.split(b"\0"):
        if b"=" in item:
            k, _, v = item.decode().partition("=")
            env[k] = v
    for k in ("PWD", "SHLVL", "_", "OLDPWD"):
        env.pop(k, None)
    return env


# Values replaced for the test: addresses, secrets and ports only.
def env_overrides(storage_dir):
    return {
        "PORT": str(COACHD_PORT),
        "DATABASE_URL": os.environ["DEPLOY_DATABASE_URL"],
        "REDIS_URL": os.environ["DEPLOY_REDIS_URL"],
        "PUBLIC_URL": BASE,
        "FRONTEND_URL": BASE,
        "TRUSTED_ORIGINS": BASE,
        "CLIENT_KEY": CLIENT_KEY,
        "STORAGE_SECRET": secrets.token_hex(32),
        "TWO_FACTOR_ENCRYPTION_KEY": secrets.token_hex(32),
        "SMTP_URL": "smtp://127.0.0.1:%d" % SMTP_PORT,
        "STORAGE_DIR": storage_dir,
        "VIDEO_APP_ID": "970ca35de60c44645bbae8a215061b33",
        "VIDEO_APP_CERTIFICATE": "5cfd2fd1755d40ecb72977518be15d3b",
        "METRICS_PORT": str(METRICS_PORT),
    }


# Optional settings (commented out in the example) the test turns on.
ENV_ADDED = {
    "SETUP_TOKEN": SETUP_TOKEN,  # to see the HTTP first-run refuse a wrong token
    "HEALTH_PROBE_CACHE_SECONDS": "1",  # to see the mail check fail within seconds
    "PUSH_URL": "http://127.0.0.1:9/push",  # nothing is pushed; never the public endpoint
}

# Variables coachd reads that an operator does not set in production (development and tests).
NOT_PRODUCTION = {"MAIL_DIR", "PUSH_DIR", "DISABLE_CLIENT_AUTH"}  # the sinks: development only


def variables_read_by_coachd():
    names = set()
    # Any reader: getenv, env_dup, config_int and whatever helper with env/config/cfg in its name.
    pat = re.compile(r'\b\w*(?:env|config|cfg)\w*\(\s*"([A-Z][A-Z0-9_]+)"')
    for top in ("main.c", "core", "routes", "rt", "db", "domain", "cli"):
        path = os.path.join(ROOT, top)
        files = [path] if os.path.isfile(path) else [
            os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".c")]
        for f in files:
            with open(f, encoding="utf-8", errors="replace") as fh:
                names.update(pat.findall(fh.read()))
    return names - NOT_PRODUCTION


# ---- nginx ---------------------------------------------------------------------------------

def nginx_render(text, cert, key, logdir):
    """(old line, new line): each old line must occur exactly once in deploy/nginx.conf."""
    subs = [
        ("    listen 80;\n", "    listen 127.0.0.1:%d;\n" % HTTP_PORT),
        ("    listen [::]:80;\n", ""),  # the test host may have no IPv6
        ("    listen 443 ssl http2;\n", "    listen 127.0.0.1:%d ssl http2;\n" % HTTPS_PORT),
        ("    listen [::]:443 ssl http2;\n", ""),
        ("    server 127.0.0.1:8080;\n", "    server 127.0.0.1:%d;\n" % COACHD_PORT),
        ("    ssl_certificate /etc/letsencrypt/live/api.example.com/fullchain.pem;\n",
         "    ssl_certificate %s;\n" % cert),
        ("    ssl_certificate_key /etc/letsencrypt/live/api.example.com/privkey.pem;\n",
         "    ssl_certificate_key %s;\n" % key),
        ("    error_log /var/log/nginx/coachd.error.log warn;\n",
         "    error_log %s/coachd.error.log warn;\n" % logdir),
    ]
    problems = []
    for old, new in subs:
        n = text.count(old)
        if n != 1:
            problems.append("%r occurs %d times" % (old.strip(), n))
        text = text.replace(old, new)
    # Both server blocks log to the same file.
    old = "    access_log /var/log/nginx/coachd.access.log coachd;\n"
    if text.count(old) != 2:
        problems.append("%r occurs %d times, expected 2" % (old.strip(), text.count(old)))
    text = text.replace(old, "    access_log %s/coachd.access.log coachd;\n" % logdir)
    if "/var/log/" in text or "/etc/letsencrypt" in text:
        problems.append("a path of the shipped file is left after rendering")
    return text, problems


NGINX_MAIN = """# The test's own main configuration: what Debian's /etc/nginx/nginx.conf provides around the
# site file (events, http, temporary folders), in a private prefix.
{user}
worker_processes 2;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/main.error.log warn;
events {{ worker_connections 1024; }}
http {{
    default_type application/octet-stream;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    include {prefix}/coachd.conf;
}}
"""


# ---- HTTP helpers --------------------------------------------------------------------------

class SourceAddressAdapter(HTTPAdapter):
    def __init__(self, ip):
        self.ip = ip
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.ip, 0)
        super().init_poolmanager(*args, **kwargs)


def session(source_ip="127.0.0.1"):
    s = requests.Session()
    s.trust_env = False  # no proxy or CA bundle from the environment: the test's own CA
    s.verify = CA
    s.mount("https://", SourceAddressAdapter(source_ip))
    s.mount("http://", SourceAddressAdapter(source_ip))
    return s


def wait_for(pred, timeout, interval=0.2):
    end = time.time() + timeout
    while time.time() < end:
        try:
            v = pred()
            if v:
                return v
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(interval)
    return None


def multipart(filename, ctype, size_or_data, boundary="----coachdDeployTest"):
    head = ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
            "Content-Type: %s\r\n\r\n" % (boundary, filename, ctype)).encode()
    tail = ("\r\n--%s--\r\n" % boundary).encode()
    return head, tail, "multipart/form-data; boundary=%s" % boundary


def tls_context():
    ctx = ssl.create_default_context(cafile=CA)
    return ctx


def plain_get(url, **kw):
    s = requests.Session()
    s.trust_env = False
    with s:
        return s.get(url, timeout=kw.pop("timeout", 5), **kw)


def scrape_metrics():
    r = plain_get("http://127.0.0.1:%d/metrics" % METRICS_PORT, timeout=5)
    r.raise_for_status()
    return r.text


def metric_sum(text, name, **labels):
    total, found = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        lab = line[len(name):].rsplit(" ", 1)[0]
        if all('%s="%s"' % (k, v) in lab for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else None


# ---- processes -----------------------------------------------------------------------------

def start(name, argv, log, **kw):
    fh = open(log, "ab")
    p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True, **kw)
    procs[name] = p
    return p


def stop(name, timeout=10):
    p = procs.pop(name, None)
    if p is None or p.poll() is not None:
        return p.returncode if p else None
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None


def stop_all():
    for name in list(procs):
        stop(name, 5)


# ---- the checks ----------------------------------------------------------------------------

def static_checks(tmp):
    # F7: the unit as shipped, with only ExecStart pointing at the built binary (verify insists
    # on an executable path) and User/Group at an account of this machine when coachd is none.
    if shutil.which("systemd-analyze"):
        with open(os.path.join(DEPLOY, "coachd.service")) as f:
            unit = f.read()
        shipped = "ExecStart=/usr/local/bin/coachd serve\n"
        check("F7 systemd", "coachd.service starts /usr/local/bin/coachd serve", unit.count(shipped) == 1)
        unit = unit.replace(shipped, "ExecStart=%s serve\n" % BIN)
        udir = os.path.join(tmp, "unit")
        os.makedirs(udir)
        upath = os.path.join(udir, "coachd.service")
        with open(upath, "w") as f:
            f.write(unit)
        def verify():
            r = subprocess.run(["systemd-analyze", "verify", "--man=no", upath], capture_output=True,
                               text=True, cwd=udir)
            return r.returncode, (r.stdout + r.stderr).strip()
        rc, out = verify()
        # verify exits 0 even for lines it ignores ("Failed to parse ..."): any output fails.
        check("F7 systemd", "systemd-analyze verify deploy/coachd.service: exit 0, no complaint",
              rc == 0 and not out, out or "exit %d" % rc)
        bad = unit.replace("TimeoutStopSec=45\n", "TimeoutStopSec=45  # seconds\n")
        with open(upath, "w") as f:
            f.write(bad)
        rc, out = verify()
        check("F7 systemd", "the verify step catches a trailing comment (as in the old docs)",
              "Failed to parse" in out and "# seconds" in out, out)
        m = re.search(r"^TimeoutStopSec=(\d+)$", unit, re.M)
        # The grace, then up to 5 s for the teardown of what was cut (main.c), then a margin.
        check("F7 systemd", "TimeoutStopSec is above the example's SHUTDOWN_GRACE_SECONDS + 5 s",
              m and int(m.group(1)) > int(EXAMPLE.get("SHUTDOWN_GRACE_SECONDS", "30")) + 5)
    else:
        check("F7 systemd", "systemd-analyze is installed (package systemd)", False)

    # promtool: the configuration, the rules, their unit tests, and that those tests can fail.
    for argv, what in ((["promtool", "check", "config", "prometheus.yml"], "promtool check config"),
                       (["promtool", "check", "rules", "alerts.yml"], "promtool check rules"),
                       (["promtool", "test", "rules", "alerts_test.yml"], "promtool test rules")):
        r = subprocess.run(argv, capture_output=True, text=True, cwd=DEPLOY)
        check("F9 docs", "%s deploy/%s" % (what, argv[-1]), r.returncode == 0, r.stdout + r.stderr)
    with open(os.path.join(DEPLOY, "prometheus.yml")) as f:
        check("F4 metrics", "prometheus.yml scrapes 127.0.0.1:METRICS_PORT of the example",
              "127.0.0.1:%s" % EXAMPLE.get("METRICS_PORT", "?") in f.read())
    pdir = os.path.join(tmp, "promtool")
    os.makedirs(pdir)
    shutil.copy(os.path.join(DEPLOY, "alerts_test.yml"), pdir)
    with open(os.path.join(DEPLOY, "alerts.yml")) as f:
        rules = f.read()
    broken = rules.replace("coachd_outbox_oldest_age_seconds) > 600", "coachd_outbox_oldest_age_seconds) > 6000")
    with open(os.path.join(pdir, "alerts.yml"), "w") as f:
        f.write(broken)
    r = subprocess.run(["promtool", "test", "rules", "alerts_test.yml"], capture_output=True,
                       text=True, cwd=pdir)
    check("F9 docs", "promtool test rules fails when an alert's threshold is broken",
          broken != rules and r.returncode != 0 and "CoachdOutboxStuck" in r.stdout + r.stderr)

    # The environment example: complete, and the same to systemd and to sh.
    path = os.path.join(DEPLOY, "coachd.env.example")
    sh = parse_env_sh(path)
    check("F9 docs", "coachd.env.example reads the same under systemd and sh", sh == EXAMPLE,
          "systemd: %r\nsh: %r" % (EXAMPLE, sh))
    mf = EXAMPLE.get("MAIL_FROM", "")
    check("F9 docs", "MAIL_FROM with spaces and <> survives EnvironmentFile quoting (%r)" % mf,
          " " in mf and re.fullmatch(r"[^<>]+ <[^<>@ ]+@[^<>@ ]+>", mf))
    with open(path) as f:
        text = f.read()
    mentioned = set(re.findall(r"^#?([A-Z][A-Z0-9_]+)=", text, re.M))
    missing = sorted(variables_read_by_coachd() - mentioned)
    check("F9 docs", "coachd.env.example names every variable coachd reads", not missing,
          "missing: %s" % ", ".join(missing))
    trailing = [l for l in text.splitlines() if not l.startswith("#") and re.search(r"\s#", l)]
    check("F9 docs", "coachd.env.example has no comment after a value", not trailing, trailing)


def database_checks(env):
    # F9: the rights docs/operations.md asks for (a role owning the database, no superuser) are
    # enough for migrate, twice (idempotent).
    for n in (1, 2):
        r = subprocess.run([BIN, "migrate"], env=env, capture_output=True, text=True, timeout=120)
        check("F9 docs", "coachd migrate (run %d) as the database's owner, not a superuser" % n,
              r.returncode == 0, r.stdout + r.stderr)


def run_briefly(env, seconds=10):
    """coachd serve with env on ports of its own (in case it starts): (exit status or None when
    it was still running after `seconds` and got killed, its output)."""
    env = dict(env)
    env["PORT"], env["METRICS_PORT"] = str(free_port()), str(free_port())
    p = subprocess.Popen([BIN, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=seconds)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        rc = None
    return rc, out.decode(errors="replace")


def config_refusal_check(env):
    # F6: the example as shipped (CHANGE_ME secrets) must not start.
    bad = dict(env)
    bad["STORAGE_SECRET"] = EXAMPLE.get("STORAGE_SECRET", "")
    rc, out = run_briefly(bad)
    check("F6 config", "STORAGE_SECRET=CHANGE_ME from the example: exit 1 naming STORAGE_SECRET",
          rc == 1 and "STORAGE_SECRET" in out, "exit %s: %s" % (rc, out[-600:]))
    # F8: LOG_FORMAT=json is JSON from the first line, also for what configuration reports
    # before anything else (an unknown LOG_LEVEL, refused or warned about).
    bad = dict(env)
    bad["LOG_LEVEL"] = "loud"
    rc, out = run_briefly(bad)
    first = out.splitlines()[0] if out.strip() else ""
    try:
        json.loads(first)
        is_json = True
    except ValueError:
        is_json = False
    check("F8 logs", "LOG_FORMAT=json with LOG_LEVEL=loud: the first line is JSON", is_json, first)


def read_stream(sess, path, box):
    """Reads an event stream through nginx; records when the hello and the first ping came."""
    t0 = time.time()
    try:
        with sess.get(BASE + path, stream=True, timeout=(5, 40),
                      headers={"Accept": "text/event-stream"}) as r:
            box["status"] = r.status_code
            box["buffering"] = r.headers.get("X-Accel-Buffering")
            for line in r.iter_lines(chunk_size=1, decode_unicode=True):
                if line.startswith("retry:") and "hello" not in box:
                    box["hello"] = time.time() - t0
                if line == "event: ping":
                    box["ping"] = time.time() - t0
                    return
    except Exception as e:  # noqa: BLE001
        box["error"] = repr(e)


def slow_upload(cookie, org_id, size, seconds, box):
    """POSTs a multipart upload of `size` bytes through nginx over about `seconds`."""
    data = os.urandom(size)
    box["sha"] = hashlib.sha256(data).hexdigest()
    head, tail, ctype = multipart("slow.mp4", "video/mp4", size)
    conn = http.client.HTTPSConnection("127.0.0.1", HTTPS_PORT, context=tls_context(), timeout=90)
    try:
        conn.putrequest("POST", "/api/files/upload")
        conn.putheader("Content-Type", ctype)
        conn.putheader("Content-Length", str(len(head) + size + len(tail)))
        conn.putheader("Cookie", cookie)
        conn.putheader("X-Organization-Id", org_id)
        conn.endheaders()
        conn.send(head)
        step = 256 * 1024
        pause = seconds / (size / step)
        for off in range(0, size, step):
            conn.send(data[off:off + step])
            box["sent"] = off + step
            time.sleep(pause)
        conn.send(tail)
        box["sent_all"] = time.time()
        r = conn.getresponse()
        box["status"] = r.status
        box["body"] = r.read().decode(errors="replace")
    except Exception as e:  # noqa: BLE001
        box["error"] = repr(e)
    finally:
        conn.close()


def live_checks(tmp, env, storage_dir, logdir):
    coachd_log = os.path.join(logdir, "coachd.log")
    p = start("coachd", [BIN, "serve"], coachd_log, env=env, cwd=tmp)
    up = wait_for(lambda: p.poll() is None and plain_get(
        "http://127.0.0.1:%d/api/health/live" % COACHD_PORT, timeout=2).status_code, 30)
    if not check("F9 docs", "coachd serve starts with WORKERS=2 from the example", up and p.poll() is None,
                 open(coachd_log).read()[-1500:]):
        return
    anon = session()

    # ---- F1 health endpoints, through nginx, without X-Client-Key ----
    r = anon.get(BASE + "/api/health/live")
    check("F1 health", "GET /api/health/live through nginx, no client key: 200", r.status_code == 200,
          "%d %s" % (r.status_code, r.text[:200]))
    # As a balancer does: a worker answers before its database and Redis connections are up,
    # and is not ready until they are.
    def ready_answer():
        answer = anon.get(BASE + "/api/health/ready")
        return answer if answer.status_code == 200 else None
    r = wait_for(ready_answer, 15) or anon.get(BASE + "/api/health/ready")
    check("F1 health", "GET /api/health/ready through nginx, no client key: 200 {\"status\":\"ok\"}",
          r.status_code == 200 and r.headers.get("Content-Type", "").startswith("application/json")
          and r.json().get("status") == "ok", "%d %s" % (r.status_code, r.text[:200]))

    # ---- F9: TLS, redirect, what the proxy does not serve ----
    r = plain_get("http://127.0.0.1:%d/api/auth/get-session?x=1" % HTTP_PORT, allow_redirects=False)
    check("F9 docs", "plain HTTP answers 301 to https:// with path and query kept",
          r.status_code == 301 and r.headers.get("Location", "").startswith("https://")
          and r.headers["Location"].endswith("/api/auth/get-session?x=1"),
          "%d %s" % (r.status_code, r.headers.get("Location")))
    r = anon.get(BASE + "/metrics")
    check("F4 metrics", "/metrics is not served on the public side (404)", r.status_code == 404,
          r.status_code)
    r = anon.get(BASE + "/api/health/ready")
    check("F9 docs", "HSTS on HTTPS answers", "max-age" in r.headers.get("Strict-Transport-Security", ""))

    # ---- F3 first admin ----
    admin_email = "admin-%s@deploy.test" % uuid.uuid4().hex[:8]
    body = {"email": admin_email, "password": PASSWORD, "name": "Ada Admin"}
    r = anon.post(BASE + "/api/setup/first-run", json=body)
    check("F3 first-run", "POST /api/setup/first-run through the proxy without X-Setup-Token: 403",
          r.status_code == 403, "%d %s" % (r.status_code, r.text[:200]))
    admin_made = r.status_code == 201
    r = anon.post(BASE + "/api/setup/first-run", json=body, headers={"X-Setup-Token": "x" + SETUP_TOKEN})
    check("F3 first-run", "POST /api/setup/first-run with a wrong X-Setup-Token: 403",
          r.status_code == 403, "%d %s" % (r.status_code, r.text[:200]))
    admin_made = admin_made or r.status_code == 201
    r = subprocess.run([BIN, "first-run", "--email", admin_email, "--name", "Ada Admin"], env=env,
                       input=PASSWORD + "\n", capture_output=True, text=True, timeout=60)
    cli_out = r.stdout
    ok = check("F3 first-run", "coachd first-run --email --name, password on stdin: exit 0",
               r.returncode == 0 and cli_out.strip(), "exit %d: %s" % (r.returncode, (r.stdout + r.stderr)[-500:]))
    if ok:
        r2 = subprocess.run([BIN, "first-run", "--email", "second-" + admin_email, "--name", "Bo Second"],
                            env=env, input=PASSWORD + "\n", capture_output=True, text=True, timeout=60)
        check("F3 first-run", "a second coachd first-run: exit 1 with a message",
              r2.returncode == 1 and (r2.stdout + r2.stderr).strip(), r2.stdout + r2.stderr)
    elif not admin_made:
        note("coachd first-run failed: the admin is made over HTTP with X-Setup-Token instead")
        r = anon.post(BASE + "/api/setup/first-run", json=body, headers={"X-Setup-Token": SETUP_TOKEN})
        check("F3 first-run", "POST /api/setup/first-run with the right X-Setup-Token: 201",
              r.status_code == 201, "%d %s" % (r.status_code, r.text[:200]))

    # ---- F9: API calls, Secure cookies ----
    admin = session()
    r = admin.post(BASE + "/api/auth/sign-in/email", json={"email": admin_email, "password": PASSWORD})
    check("F9 docs", "the first admin signs in through nginx", r.status_code == 200,
          "%d %s" % (r.status_code, r.text[:200]))
    if ok:
        me = admin.get(BASE + "/api/users/me")
        uid = me.json()["data"]["id"] if me.status_code == 200 else "?"
        check("F3 first-run", "coachd first-run printed the admin's id (%s), who is a PlatformAdmin" % uid,
              uid in cli_out.split() and me.json()["data"].get("globalRole") == "PlatformAdmin",
              "printed %r; /api/users/me %s" % (cli_out, me.text[:300]))
    cookie = r.headers.get("Set-Cookie", "")
    check("F9 docs", "the session cookie is Secure and HttpOnly over HTTPS",
          "auth.session_token=" in cookie and "; Secure" in cookie and "HttpOnly" in cookie, cookie)
    r = admin.post(BASE + "/api/organizations", json={"name": "Deploy Org %s" % uuid.uuid4().hex[:6]},
                   headers={"Origin": BASE})
    org_ok = check("F9 docs", "the admin creates an organization (cookie sent back, CSRF origin trusted)",
                   r.status_code == 201, "%d %s" % (r.status_code, r.text[:200]))
    org_id = r.json()["data"]["id"] if org_ok else None

    coach_email = "coach-%s@deploy.test" % uuid.uuid4().hex[:8]
    coach = session()
    r = coach.post(BASE + "/api/auth/sign-up/email",
                   json={"email": coach_email, "password": PASSWORD, "name": "Cora Coach"})
    check("F9 docs", "sign-up through nginx: 200 with a session", r.status_code == 200
          and "auth.session_token" in coach.cookies, "%d %s" % (r.status_code, r.text[:200]))
    coach_id = r.json().get("user", {}).get("id") if r.status_code == 200 else None
    if org_id and coach_id:
        r = admin.post(BASE + "/api/organizations/%s/users" % org_id,
                       json={"userId": coach_id, "roleInOrganization": "Coach"}, headers={"Origin": BASE})
        check("F9 docs", "the admin adds the new user as Coach", r.status_code == 201,
              "%d %s" % (r.status_code, r.text[:200]))
    coach.headers["X-Organization-Id"] = org_id or ""
    r = coach.get(BASE + "/api/users/me")
    check("F9 docs", "GET /api/users/me with the cookie", r.status_code == 200
          and r.json()["data"]["email"] == coach_email, "%d %s" % (r.status_code, r.text[:200]))
    rid = r.headers.get("X-Request-Id", "")

    # ---- F9: an event stream through nginx, read in the background (the ping comes in ~25 s) ----
    sse = {}
    sse_thread = threading.Thread(target=read_stream, args=(coach, "/api/events/users/me/events", sse),
                                  daemon=True)
    sse_thread.start()

    # ---- F9: a 20 MB upload and its download through nginx ----
    data = os.urandom(20 * 1024 * 1024)
    head, tail, ctype = multipart("clip.mp4", "video/mp4", len(data))
    t0 = time.time()
    r = coach.post(BASE + "/api/files/upload", data=head + data + tail, headers={"Content-Type": ctype})
    up_s = time.time() - t0
    ok = check("F9 docs", "20 MB multipart upload through nginx: 201 (%.1f s)" % up_s,
               r.status_code == 201, "%d %s" % (r.status_code, r.text[:300]))
    if ok:
        d = r.json()["data"]
        check("F9 docs", "the stored sha256 is the sent bytes'", d["sha256Hash"] == hashlib.sha256(data).hexdigest())
        f = coach.get(BASE + "/api/files/%s" % d["fileId"]).json()["data"]
        check("F9 docs", "presignedUrl points through the proxy (PUBLIC_URL)", f["presignedUrl"].startswith(BASE + "/"),
              f["presignedUrl"])
        t0 = time.time()
        g = anon.get(f["presignedUrl"])
        check("F9 docs", "download through nginx: 200, byte-equal (%.1f s)" % (time.time() - t0),
              g.status_code == 200 and g.content == data, "%d, %d bytes" % (g.status_code, len(g.content)))

    # ---- F2: ten wrong sign-ins from one client do not block another ----
    victim_email = "victim-%s@deploy.test" % uuid.uuid4().hex[:8]
    r = session().post(BASE + "/api/auth/sign-up/email",
                       json={"email": victim_email, "password": PASSWORD, "name": "Vic Victim"})
    check("F2 proxy", "the second client's account exists", r.status_code == 200, r.text[:200])
    attacker = session("127.0.0.2")
    codes = [attacker.post(BASE + "/api/auth/sign-in/email",
                           json={"email": "nobody-%d@deploy.test" % i, "password": "wrong-password"}).status_code
             for i in range(10)]
    check("F2 proxy", "ten wrong sign-ins from 127.0.0.2: 401 each", codes == [401] * 10, codes)
    # A forged X-Forwarded-For does not help: nginx appends the real address, coachd takes the
    # right-most untrusted one.
    r = attacker.post(BASE + "/api/auth/sign-in/email", json={"email": "nobody@deploy.test", "password": "x" * 10},
                      headers={"X-Forwarded-For": "127.0.0.9"})
    check("F2 proxy", "the eleventh from 127.0.0.2, with a forged X-Forwarded-For: 429", r.status_code == 429,
          "%d %s" % (r.status_code, r.text[:200]))
    other = session("127.0.0.3")
    r = other.post(BASE + "/api/auth/sign-in/email", json={"email": victim_email, "password": PASSWORD})
    check("F2 proxy", "then a sign-in from 127.0.0.3 with the right password: 200", r.status_code == 200,
          "%d %s" % (r.status_code, r.text[:200]))
    other_rid = r.headers.get("X-Request-Id", "")

    # ---- F4: /metrics on METRICS_PORT counts requests of both workers ----
    try:
        before = scrape_metrics()
        n = 40
        for _ in range(n):  # a fresh connection each: SO_REUSEPORT spreads them over the workers
            plain_get("http://127.0.0.1:%d/api/auth/get-session" % COACHD_PORT,
                      headers={"Connection": "close"})
        route = "/api/auth/get-session"
        b = metric_sum(before, "coachd_http_requests_total", route=route) or 0
        # Workers may publish their figures for the scrape on a timer: a few scrapes, as
        # Prometheus makes them, until the count is complete.
        end = time.time() + 5
        while True:
            after = scrape_metrics()
            a = metric_sum(after, "coachd_http_requests_total", route=route) or 0
            if a - b >= n or time.time() > end:
                break
            time.sleep(0.5)
        check("F4 metrics", "METRICS_PORT: %d requests on fresh connections counted %d" % (n, a - b),
              a - b == n, "before %s after %s" % (b, a))
        workers = set(re.findall(r'worker="([^"]+)"', after))
        pids = {line.rsplit(" ", 1)[1] for line in after.splitlines() if line.startswith("coachd_worker_pid")}
        check("F4 metrics", "the scrape shows both workers (worker labels %s, pids %s)"
              % (sorted(workers), sorted(pids)), len(workers) >= 2 or len(pids) >= 2)
    except requests.RequestException as e:
        check("F4 metrics", "GET http://127.0.0.1:METRICS_PORT/metrics answers", False, repr(e))

    # ---- F8 / F2: the access logs ----
    secret = "tok%s" % secrets.token_hex(16)
    anon.get(BASE + "/api/invites/%s" % secret)  # an invite token in the path
    anon.get(BASE + "/api/auth/verify-email?token=%s" % secret)  # and in a query string
    time.sleep(0.5)
    with open(os.path.join(logdir, "coachd.access.log")) as f:
        nlog = f.read()
    check("F8 logs", "nginx's access log has no query string (presigned signatures, tokens)",
          "?" not in nlog and "s=" not in nlog and nlog.count("\n") > 20, nlog[-600:])
    check("F8 logs", "nginx's access log masks the invite token of GET /api/invites/:token",
          secret not in nlog and "/api/invites/:token" in nlog, [l for l in nlog.splitlines() if "invites" in l])
    check("F8 logs", "nginx's access log line carries the id coachd echoed ($request_id)",
          rid and ("id=%s" % rid) in nlog, rid)
    with open(coachd_log) as f:
        lines = f.read().splitlines()
    bad = []
    recs = []
    for line in lines:
        try:
            recs.append(json.loads(line))
        except ValueError:
            bad.append(line)
    check("F8 logs", "LOG_FORMAT=json: every line of coachd's output is JSON, the first included",
          lines and not bad, "\n".join(bad[:5]))
    rec = [x for x in recs if x.get("requestId") == other_rid and x.get("msg") == "request"]
    check("F2 proxy", "coachd's access record of the 127.0.0.3 sign-in names client 127.0.0.3 and nginx's id",
          rec and rec[0].get("client") == "127.0.0.3", rec or "no record with requestId %s" % other_rid)

    # ---- F1: the SMTP sink stops; readiness stays 200, /api/health says mail ----
    stop("smtp")
    time.sleep(2.5)  # HEALTH_PROBE_CACHE_SECONDS=1
    r = anon.get(BASE + "/api/health", headers={"X-Client-Key": CLIENT_KEY})
    js = r.json() if r.headers.get("Content-Type", "").startswith("application/json") else {}
    check("F1 health", "SMTP down: /api/health answers 503 with checks.mail error",
          r.status_code == 503 and js.get("checks", {}).get("mail") == "error", "%d %s" % (r.status_code, r.text[:300]))
    r = anon.get(BASE + "/api/health/ready")
    check("F1 health", "SMTP down: /api/health/ready stays 200", r.status_code == 200,
          "%d %s" % (r.status_code, r.text[:200]))
    # The gauge comes from the probe of the worker that answers; a stale one starts a new probe,
    # so a few scrapes, as Prometheus makes them.
    m, err = None, ""
    end = time.time() + 10
    while time.time() < end:
        try:
            m = metric_sum(scrape_metrics(), "coachd_health_check_ok", check="mail")
        except requests.RequestException as e:
            err = repr(e)
        if m == 0:
            break
        time.sleep(0.5)
    check("F1 health", "SMTP down: coachd_health_check_ok{check=\"mail\"} is 0 in /metrics", m == 0,
          err or "last value: %s" % m)

    # ---- the event stream's result ----
    sse_thread.join(35)
    check("F9 docs", "event stream through nginx: 200, the retry hello at once (%.2f s)" % sse.get("hello", -1),
          sse.get("status") == 200 and sse.get("hello", 99) < 2, sse)
    check("F9 docs", "event stream through nginx: a ping arrives (after %.1f s)" % sse.get("ping", -1),
          "ping" in sse, sse)

    # ---- F5: SIGTERM during a slow upload ----
    box = {}
    grace = int(env.get("SHUTDOWN_GRACE_SECONDS", "30"))
    seconds = 12  # longer than the old fixed 9 s drain, well inside the grace
    cookie = "auth.session_token=%s" % coach.cookies.get("auth.session_token", "")
    t = threading.Thread(target=slow_upload, args=(cookie, org_id or "", 8 * 1024 * 1024, seconds, box),
                         daemon=True)
    t.start()
    wait_for(lambda: box.get("sent", 0) >= 1024 * 1024, 10)
    t_term = time.time()
    p.send_signal(signal.SIGTERM)
    t.join(grace + 20)
    try:
        rc = p.wait(grace + 15)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.time() - t_term
    procs.pop("coachd", None)
    body = box.get("body", "")
    sha_ok = '"sha256Hash":"%s"' % box.get("sha", "-") in body.replace(" ", "")
    finished = box.get("status") == 201 and sha_ok
    check("F5 shutdown", "SIGTERM 1 MB into a %d s upload: the upload still answers 201 with its hash" % seconds,
          finished, box.get("error") or "%s %s" % (box.get("status"), body[:300]))
    # The exit status says whether the drain was complete: 0 only when nothing was cut.
    check("F5 shutdown", "exit status %s after %.1f s (grace %d s): %s" % (
        rc, took, grace, "0, the drain complete" if finished else "must be 1, the upload was cut"),
        rc == (0 if finished else 1) and took < grace + 10)
    tmpdir = os.path.join(storage_dir, ".tmp")
    left = os.listdir(tmpdir) if os.path.isdir(tmpdir) else []
    check("F5 shutdown", "no temporary upload file left in STORAGE_DIR/.tmp", not left, left)


def main():
    global CA, EXAMPLE
    os.makedirs(LOGS, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="coachd-deploy-")
    os.chmod(tmp, 0o755)  # nginx's workers (nobody when started as root) reach their temp folders
    logdir = os.path.join(tmp, "logs")
    storage_dir = os.path.join(tmp, "storage")
    for d in ("logs", "tmp", "mail"):
        os.makedirs(os.path.join(tmp, d))

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        with open(os.path.join(DEPLOY, "coachd.env.example")) as f:
            EXAMPLE = parse_env_systemd(f.read())

        # Certificate for 127.0.0.1 and localhost, signed by itself.
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                            "-keyout", key, "-out", cert], capture_output=True, text=True)
        if not check("F9 docs", "openssl makes a self-signed certificate", r.returncode == 0, r.stderr):
            return
        CA = cert

        static_checks(tmp)

        # Environment: the example's values, the test's replacements, nothing inherited but PATH.
        over = env_overrides(storage_dir)
        absent = sorted(k for k in over if k not in EXAMPLE)
        check("F9 docs", "every value the test replaces is set in coachd.env.example", not absent, absent)
        absent = sorted(k for k in ENV_ADDED if not re.search(r"^#%s=" % k, open(
            os.path.join(DEPLOY, "coachd.env.example")).read(), re.M))
        check("F9 docs", "every setting the test turns on is shown in coachd.env.example", not absent, absent)
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        env.update(EXAMPLE)
        env.update(over)
        env.update(ENV_ADDED)
        check("F9 docs", "the example runs APP_ENV=production, WORKERS=2, behind TRUSTED_PROXIES 127.0.0.1",
              env.get("APP_ENV") == "production" and env.get("WORKERS") == "2"
              and "127.0.0.1" in env.get("TRUSTED_PROXIES", "").split(","))
        with open(os.path.join(LOGS, "coachd.env"), "w") as f:
            f.write("".join("%s=%s\n" % kv for kv in sorted(env.items())
                            if kv[0] not in ("CLIENT_KEY", "STORAGE_SECRET", "SETUP_TOKEN",
                                                 "TWO_FACTOR_ENCRYPTION_KEY")))

        config_refusal_check(env)
        database_checks(env)

        # nginx with the shipped site file.
        with open(os.path.join(DEPLOY, "nginx.conf")) as f:
            site, problems = nginx_render(f.read(), cert, key, logdir)
        check("F9 docs", "deploy/nginx.conf renders with its exact known lines replaced", not problems, problems)
        with open(os.path.join(tmp, "coachd.conf"), "w") as f:
            f.write(site)
        user = "user nobody nogroup;" if os.geteuid() == 0 else ""
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(NGINX_MAIN.format(prefix=tmp, user=user))
        ngx = ["nginx", "-p", tmp, "-e", os.path.join(tmp, "logs", "main.error.log"),
               "-c", os.path.join(tmp, "nginx.conf")]
        r = subprocess.run(ngx + ["-t"], capture_output=True, text=True)
        if not check("F9 docs", "nginx -t accepts deploy/nginx.conf", r.returncode == 0, r.stderr):
            return
        start("nginx", ngx + ["-g", "daemon off;"], os.path.join(logdir, "nginx.out"))
        start("smtp", ["/usr/bin/python3", os.path.join(ROOT, "tests/api/smtp_sink.py"), "--dir",
                       os.path.join(tmp, "mail"), "--port", str(SMTP_PORT)], os.path.join(logdir, "smtp.log"))
        if not wait_for(lambda: socket.create_connection(("127.0.0.1", HTTPS_PORT), 1).close() or True, 10):
            check("F9 docs", "nginx listens on %d" % HTTPS_PORT, False)
            return
        live_checks(tmp, env, storage_dir, logdir)
    except Exception as e:  # noqa: BLE001 - a crash of the test is a failure, named
        import traceback
        traceback.print_exc()
        check("test", "the checks ran to their end", False, repr(e))
    finally:
        stop_all()
        for name in os.listdir(logdir) if os.path.isdir(logdir) else []:
            shutil.copy(os.path.join(logdir, name), LOGS)
        shutil.rmtree(tmp, ignore_errors=True)
        passed = sum(1 for ok, _, _ in results if ok)
        failed = len(results) - passed
        if failed:
            print("failed findings: %s" % ", ".join(sorted({f for ok, f, _ in results if not ok})))
        print("%d passed, %d failed" % (passed, failed), flush=True)


CA = None
EXAMPLE = {}

if __name__ == "__main__":
    main()
    sys.exit(0 if results and all(ok for ok, _, _ in results) else 1)
