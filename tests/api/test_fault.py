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
