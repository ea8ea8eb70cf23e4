"""PostgreSQL restarts while requests run: coachd answers 503 meanwhile and recovers without
a restart of its own."""
import threading
import time

from helpers import Client, sign_up


def test_postgres_restart_is_survived(restart_postgres):
    c, _ = sign_up()
    statuses = []
    stop = threading.Event()

    def hammer():
        with Client() as h:
            h.cookies.update(c.cookies)
            while not stop.is_set():
                try:
                    statuses.append(h.get("/api/users/me", timeout=10).status_code)
                except Exception as e:  # the server itself must never drop connections
                    statuses.append(repr(e))
                time.sleep(0.01)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    restart_postgres()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if c.get("/api/users/me").status_code == 200:
            break
        time.sleep(0.2)
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    assert c.get("/api/users/me").status_code == 200
    bad = [s for s in statuses if s not in (200, 503)]
    assert not bad, "only 200 or 503 while PostgreSQL restarts, got %r" % bad[:5]
    assert statuses[-1] == 200


def test_a_taken_port_exits_1_and_frees_what_it_held():
    """A server whose port another program holds (without SO_REUSEPORT) cannot listen: it says
    so and exits 1. Under the ASan build the leak checker runs at that exit; the supervisor used
    to leave its worker tables behind on this path (a LeakSanitizer report, another status)."""
    import os
    import socket
    import subprocess
    from helpers import ROOT

    binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        env = dict(os.environ, PORT=str(holder.getsockname()[1]), HOST="127.0.0.1", WORKERS="2")
        r = subprocess.run([binary, "serve"], env=env, capture_output=True, text=True,
                           timeout=60)
    finally:
        holder.close()
    out = r.stdout + r.stderr
    assert "address already in use" in out, out[-2000:]
    assert "LeakSanitizer" not in out, out[-4000:]
    assert r.returncode == 1, (r.returncode, out[-2000:])


def test_workers_stop_when_their_supervisor_is_killed():
    """SIGKILL to the supervisor: its workers drain and exit instead of holding the port with
    nobody left to replace or stop them (they used to keep serving, orphaned)."""
    import os
    import signal
    import subprocess
    import requests
    from helpers import ROOT, free_port, wait_until

    binary = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
    port = free_port()
    env = dict(os.environ, PORT=str(port), HOST="127.0.0.1", WORKERS="2")
    proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port

    def answers():
        try:
            requests.get(base + "/api/auth/session", timeout=1)
            return True
        except (requests.ConnectionError, requests.Timeout):
            return False

    try:
        wait_until(answers, timeout=30, what="the server answers")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        wait_until(lambda: not answers(), timeout=20, what="the orphaned workers stop")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
