"""What a worker holds for Last-Event-ID replays is bounded (docs/security.md, "Streams"): a
replay writes while the stream's queue is below its high water and waits for the client to
drain it, streams resuming from the same place share one encoding of each entry, and the history
a worker holds unsent stays within REPLAY_MEMORY_MAX however many streams replay and whether
their clients read or not. Before, each stream encoded its own copy of every entry and queued up
to 16 MiB of it at once: 20 streams of one user that read nothing held hundreds of MB."""
import concurrent.futures
import os
import re
import socket
import threading
import time
from urllib.parse import urlsplit

import requests

from chat_fixtures import Chat
from helpers import RedisSub, second_coachd

TOKEN = "replay-metrics-0123456789"
CAP = 2 * 1024 * 1024
MESSAGES = 300
BODY = "€" * 3995  # with a 5-character prefix: 4,000 characters, ~12 KB per event


def worker_rss(base):
    """The resident memory (bytes) of the worker that answers on base."""
    r = requests.get(base + "/api/auth/session", timeout=10)
    pid = int(r.headers["X-Request-Id"][:8], 16)
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


# The sanitizers' allocator keeps freed memory in quarantine: RSS says nothing there.
SANITIZED = "asan" in os.environ.get("COACHD_BIN", "")


def metric(base, name):
    text = requests.get(base + "/metrics", headers={"Authorization": "Bearer " + TOKEN},
                        timeout=10).text
    # A per-worker gauge: one line per worker (worker="slot"), summed (this server has one).
    found = re.findall(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), text, re.M)
    assert found, "%s is not in /metrics" % name
    return sum(float(v) for v in found)


class RawStream:
    """A user stream on a socket with a small receive window, so what the client does not read
    stays on the server; read_until() parses the SSE events once the test starts reading."""

    def __init__(self, base, token, last_event_id):
        u = urlsplit(base)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect
        self.sock.connect((u.hostname, u.port))
        self.sock.settimeout(60)
        self.sock.sendall(("GET /api/events/users/me/events HTTP/1.1\r\nHost: x\r\n"
                           "Accept: text/event-stream\r\nLast-Event-ID: %s\r\n"
                           "Cookie: auth.session_token=%s\r\n\r\n"
                           % (last_event_id, token)).encode())
        self.buf = b""
        self.events = []  # (event, id, data)

    def read_until(self, count, deadline):
        """Reads until `count` chat-message events arrived (or the deadline, or the close)."""
        head_done = False
        while time.monotonic() < deadline:
            if not head_done and b"\r\n\r\n" in self.buf:
                head, self.buf = self.buf.split(b"\r\n\r\n", 1)
                assert head.startswith(b"HTTP/1.1 200"), head[:200]
                head_done = True
            while head_done and b"\n\n" in self.buf:
                block, self.buf = self.buf.split(b"\n\n", 1)
                fields = {}
                for line in block.decode("utf-8").split("\n"):
                    k, _, v = line.partition(": ")
                    fields[k] = v
                if "event" in fields:
                    self.events.append((fields["event"], fields.get("id"), fields.get("data")))
            if sum(1 for e in self.events if e[0] == "chat-message") >= count:
                return
            chunk = self.sock.recv(65536)
            if not chunk:
                return
            self.buf += chunk

    def close(self):
        self.sock.close()


def test_replays_stay_within_the_worker_cap_and_deliver_everything_once_read():
    chat = Chat()
    coach = chat.c("Coach")
    uid = chat.uid("Coach")
    with RedisSub("user:%s" % uid) as sub:
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda i: chat.post("Coach", "%04d " % i + BODY), range(MESSAGES)))
        posted = [sub.next("chat-message") for _ in range(MESSAGES)]
    # (history id, body) in the channel's order
    posted = [(e["id"], e["data"]["body"]) for e in posted]
    assert len({i for i, _ in posted}) == MESSAGES

    # Four streams resume from the start (they can share pages), four from positions of their
    # own (each needs its own reads): far more than 2 MiB if each held its history.
    starts = ["0-1"] * 4 + [posted[40 * k][0] for k in range(1, 5)]
    with second_coachd(METRICS_TOKEN=TOKEN, REPLAY_MEMORY_MAX=CAP) as base:
        rss0 = worker_rss(base)
        streams = [RawStream(base, coach.session_token, p) for p in starts]
        try:
            peak = waiting = rss = 0
            t_end = time.monotonic() + 4
            while time.monotonic() < t_end:  # nobody reads meanwhile
                peak = max(peak, metric(base, "coachd_replay_pending_bytes"))
                waiting = max(waiting, metric(base, "coachd_replay_waiting_streams"))
                rss = max(rss, worker_rss(base))
                time.sleep(0.05)
            assert peak <= CAP, "the worker held %d bytes of history (cap %d)" % (peak, CAP)
            # What the process really holds, not only what the gauge counts: the histories of
            # these 8 streams are about 25 MB (each stream held its own copy before).
            if not SANITIZED:
                assert rss - rss0 < CAP + 8 * 1024 * 1024, "worker RSS grew by %d" % (rss - rss0)
            assert peak > 512 * 1024, peak  # the replays did run while nobody read
            assert waiting >= 1, "no replay ever waited for memory"

            # Now every client reads: each stream gets every message after its position, in
            # the channel's order, once.
            ids = [i for i, _ in posted]
            skips = [0 if p == "0-1" else ids.index(p) + 1 for p in starts]
            deadline = time.monotonic() + 90
            threads = []
            for s, skip in zip(streams, skips):
                t = threading.Thread(target=s.read_until, args=(MESSAGES - skip, deadline),
                                     daemon=True)
                t.start()
                threads.append(t)
            while any(t.is_alive() for t in threads):
                peak = max(peak, metric(base, "coachd_replay_pending_bytes"))
                time.sleep(0.05)
            assert peak <= CAP, "the worker held %d bytes of history (cap %d)" % (peak, CAP)
            for s, p, skip in zip(streams, starts, skips):
                got = [(i, d) for ev, i, d in s.events if ev == "chat-message"]
                assert len(got) == MESSAGES - skip, (p, len(got))
                assert [i for i, _ in got] == [i for i, _ in posted[skip:]], p
                assert [re.search(r'"body":"(\d{4}) ', d).group(1) for _, d in got] == \
                    [b[:4] for _, b in posted[skip:]], p
                assert not [e for e in s.events if e[0] == "reset"], p
            # Flushed everywhere: the worker holds nothing for replays any more.
            t_end = time.monotonic() + 3
            while metric(base, "coachd_replay_pending_bytes") > 0 and time.monotonic() < t_end:
                time.sleep(0.1)
            assert metric(base, "coachd_replay_pending_bytes") == 0
            assert metric(base, "coachd_replay_waiting_streams") == 0
        finally:
            for s in streams:
                s.close()


def test_live_events_during_a_paused_replay_stay_bounded_and_arrive_once():
    """A replay paused on a client that does not read holds the live events arriving meanwhile
    up to 1 MiB per stream; past that it lets go of them and reads them from the history after
    the replay. The client still gets every event once, in order, without a reset."""
    chat = Chat()
    coach = chat.c("Coach")
    uid = chat.uid("Coach")

    def post(n, tag):
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda i: chat.post("Coach", "%s%03d " % (tag, i) + BODY[:3994]),
                        range(n)))

    with RedisSub("user:%s" % uid) as sub:
        post(120, "h")  # ~1.4 MB of history: more than a replay writes before it waits
        with second_coachd(METRICS_TOKEN=TOKEN, REPLAY_MEMORY_MAX=CAP) as base:
            s = RawStream(base, coach.session_token, "0-1")
            try:
                time.sleep(1)  # the replay has written its high water and waits
                held = []
                poster = threading.Thread(target=post, args=(150, "l"))  # ~1.8 MB live
                poster.start()
                while poster.is_alive():
                    held.append(metric(base, "coachd_replay_held_bytes"))
                    time.sleep(0.05)
                poster.join()
                posted = [sub.next("chat-message") for _ in range(270)]
                assert max(held) > 0, "no live event was held during the replay"
                assert max(held) <= 1024 * 1024, max(held)
                s.read_until(270, time.monotonic() + 60)
                got = [(i, d) for ev, i, d in s.events if ev == "chat-message"]
                assert [i for i, _ in got] == [e["id"] for e in posted]
                assert [re.search(r'"body":"(\w\d{3}) ', d).group(1) for _, d in got] == \
                    [e["data"]["body"][:4] for e in posted]
                assert not [e for e in s.events if e[0] == "reset"]
                # The replay ends once the held events the history already gave are dropped.
                t_end = time.monotonic() + 3
                while metric(base, "coachd_replay_held_bytes") > 0 and time.monotonic() < t_end:
                    time.sleep(0.1)
                assert metric(base, "coachd_replay_held_bytes") == 0
            finally:
                s.close()


def test_a_replay_waiting_for_memory_goes_on_once_streams_that_never_read_are_closed():
    """Three streams that never read take the worker's whole replay budget; a fourth, whose
    client reads, waits for memory, and gets its replay once core/http's write deadline
    (STREAM_WRITE_TIMEOUT_SECONDS=2 here) has closed the others: nobody waits forever."""
    chat = Chat()
    coach = chat.c("Coach")
    uid = chat.uid("Coach")
    n = 200
    with RedisSub("user:%s" % uid) as sub:
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda i: chat.post("Coach", "%04d " % i + BODY), range(n)))
        posted = [(e["id"], e["data"]["body"]) for e in
                  (sub.next("chat-message") for _ in range(n))]
    with second_coachd(METRICS_TOKEN=TOKEN, REPLAY_MEMORY_MAX=CAP,
                       STREAM_WRITE_TIMEOUT_SECONDS=2) as base:
        stuck = [RawStream(base, coach.session_token, posted[k][0]) for k in (0, 10, 20)]
        reader = None
        try:
            t_end = time.monotonic() + 1.5
            while metric(base, "coachd_replay_waiting_streams") < 1:
                assert time.monotonic() < t_end, "the streams that do not read never filled the cap"
                time.sleep(0.05)
            reader = RawStream(base, coach.session_token, posted[30][0])
            started = time.monotonic()
            reader.read_until(n - 31, started + 30)
            got = [i for ev, i, _ in reader.events if ev == "chat-message"]
            assert got == [i for i, _ in posted[31:]]
            # It could only finish once the others were closed for not reading.
            assert time.monotonic() - started > 1, "the reader did not wait for memory"
            for s in stuck:
                s.sock.settimeout(10)
                while s.sock.recv(65536):
                    pass  # what the server had queued, then its close
        finally:
            for s in stuck + ([reader] if reader else []):
                s.close()
