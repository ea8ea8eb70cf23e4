"""A stream whose client does not read: the server holds a bounded amount for it (a fixed kernel
send buffer, STREAM_SNDBUF, plus the stream's write queue, STREAM_MAX_PENDING) and then closes
it, instead of letting the kernel's send buffer grow to megabytes (docs/reliability.md)."""
import json
import os
import socket
import time
from urllib.parse import urlsplit

from helpers import BASE_URL, REDIS_URL, sign_up


def publisher():
    u = urlsplit(REDIS_URL)
    s = socket.create_connection((u.hostname, u.port or 6379), 5)
    f = s.makefile("rb")

    def publish(channel, msg):
        args = [b"PUBLISH", channel.encode(), msg.encode()]
        s.sendall(b"*3\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        return int(f.readline()[1:])

    return s, publish


def wait_for_log(line, timeout):
    """Waits until coachd's log (COACHD_LOG_FILE) holds `line`."""
    deadline = time.monotonic() + timeout
    while True:
        with open(os.environ["COACHD_LOG_FILE"], encoding="utf-8", errors="replace") as f:
            if line in f.read():
                return
        assert time.monotonic() < deadline, "no %r in the log within %d s" % (line, timeout)
        time.sleep(0.1)


def test_a_stream_that_is_not_read_is_closed_after_a_bounded_backlog():
    c, u = sign_up()
    base = urlsplit(BASE_URL)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    s.connect((base.hostname, base.port))
    s.settimeout(10)
    s.sendall(("GET /api/events/users/me/events HTTP/1.1\r\nHost: x\r\nCookie: %s=%s\r\n\r\n"
               % ("auth.session_token", c.session_token)).encode())
    head = b""
    while b"retry: 3000\n\n" not in head:
        chunk = s.recv(4096)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    time.sleep(0.3)  # subscribed
    rconn, publish = publisher()
    try:
        pad = "x" * 16384
        sent = 0
        for i in range(256):  # 4 MiB of events, none of it read meanwhile
            msg = json.dumps({"id": "1-bp-%d" % i, "event": "bench", "data": {"pad": pad}},
                             separators=(",", ":"))
            publish("user:%s" % u["id"], msg)
            sent += len(msg)
        # The server must have taken in what was published before the client reads: a reader
        # that starts while the events are still arriving keeps up, and nothing needs closing
        # (under load that read all 4 MiB and then waited on a stream left open). Its log line
        # of the close is the sign.
        wait_for_log("stream: closing slow or gone client user=%s " % u["id"], 30)
        # Now read: what the server kept for this client, then its close.
        got = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += len(chunk)
        else:
            raise AssertionError("the stream was not closed (read %d of %d bytes)" % (got, sent))
        # Kernel buffers on both ends (about 2 x 64 KiB doubled, plus the small receive
        # buffer) and the 256 KiB write queue: far less than what was published.
        assert got < 1024 * 1024, (got, sent)
        assert sent > 4 * got
    finally:
        rconn.close()
        s.close()
