"""Streaming requests and answers that end badly (docs/security.md "Streams and their endings").

One regression test per defect found by trying the streaming paths as an attacker would: each
failed before its fix (on the ASan build by the worker dying and being replaced, on both builds
by what it left behind). The oracles are the server's own state: the worker's pid (the first 8
hex digits of X-Request-Id: a crash makes the supervisor replace it), its open descriptors
(/proc/<pid>/fd) and the temporary files of STORAGE_DIR/.tmp. tests/abuse/ runs the whole table
of endings for every streaming path."""
import hashlib
import os
import socket
import tempfile
import time
import urllib.parse

import pytest
import requests

from helpers import BASE_URL, Client, assert_error, psql_value, second_coachd, wait_until
from orgs import new_org

STORAGE_DIR = os.environ.get("COACHD_STORAGE_DIR", "")
BOUNDARY = "endingsB0undary"


@pytest.fixture(scope="module")
def org():
    return new_org()


def worker_pid(base=BASE_URL):
    r = requests.get(base + "/api/auth/session", timeout=10)
    return int(r.headers["X-Request-Id"][:8], 16)


def port_inodes(port):
    """Socket inodes of TCP connections whose local port is `port` (the server's side)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] != "0A":
                        inodes.add(cols[9])
        except FileNotFoundError:
            pass
    return inodes


def open_fds(pid, base=BASE_URL, storage_dir=STORAGE_DIR):
    """The worker's descriptors that a streaming request can hold: client connections on the
    server's port and files under the storage folder (database and Redis connections, which
    the pools open as they need them, are not counted)."""
    port = urllib.parse.urlsplit(base).port
    inodes = port_inodes(port)
    root = os.path.realpath(storage_dir)
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            n += 1
        elif target.startswith(root + "/"):
            n += 1
    return n


def tmp_entries(storage_dir=STORAGE_DIR):
    d = os.path.join(storage_dir, ".tmp")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def connect(base):
    u = urllib.parse.urlsplit(base)
    return socket.create_connection((u.hostname, u.port), timeout=30)


def auth_head(client, org, method, path, extra):
    return ("%s %s HTTP/1.1\r\nHost: x\r\nCookie: auth.session_token=%s\r\n"
            "X-Organization-Id: %s\r\n%s\r\n" % (method, path, client.session_token, org.id,
                                                 extra)).encode()


def file_part(name, mime, prefix=None):
    pre = b""
    if prefix:
        pre = ('--%s\r\nContent-Disposition: form-data; name="prefix"\r\n\r\n%s\r\n'
               % (BOUNDARY, prefix)).encode()
    return pre + ('--%s\r\nContent-Disposition: form-data; name="file"; filename="%s"\r\n'
                  'Content-Type: %s\r\n\r\n' % (BOUNDARY, name, mime)).encode()


CLOSING = ("\r\n--%s--\r\n" % BOUNDARY).encode()
MULTIPART = "multipart/form-data; boundary=%s" % BOUNDARY


def read_status(s, timeout=15):
    s.settimeout(timeout)
    data = b""
    while b"\r\n" not in data:
        got = s.recv(4096)
        if not got:
            break
        data += got
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None


def stored_keys(prefix, storage_dir=STORAGE_DIR):
    root = os.path.join(storage_dir, prefix)
    keys = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            keys.append(os.path.relpath(os.path.join(dirpath, n), storage_dir))
    return sorted(keys)


# ---- 1: the client leaves while a complete upload is being stored ----------------------------


def test_client_leaving_after_a_complete_upload_leaves_no_orphan(org):
    """Was a use-after-free (the stored key was read from the freed request to delete the
    object): the worker died on the ASan build."""
    coach = org.client("Coach")
    pid = worker_pid()
    prefix = "endings/gone%d" % os.getpid()
    data = os.urandom(300 * 1024)
    for _ in range(12):
        body = file_part("left.bin", "video/mp4", prefix) + data + CLOSING
        s = connect(BASE_URL)
        s.sendall(auth_head(coach, org, "POST", "/api/files/upload",
                            "Content-Type: %s\r\nContent-Length: %d\r\n" % (MULTIPART, len(body)))
                  + body)
        s.shutdown(socket.SHUT_WR)  # FIN right after the last byte, before any answer
        s.close()
    wait_until(lambda: tmp_entries() == [], what="temporary files removed")
    assert worker_pid() == pid, "the worker was replaced"

    # Every object the requests left has its file record (the client may have left after the
    # record was written); the others were deleted.
    def no_orphans():
        keys = stored_keys(prefix)
        rows = psql_value("SELECT count(*) FROM files WHERE storage_key LIKE :'p'",
                          p=prefix + "/%")
        return len(keys) == int(rows)
    wait_until(no_orphans, what="objects without a record deleted")


# ---- 2 and 3: core/http answers a streamed body itself -------------------------------------


def test_malformed_chunk_after_a_big_chunk_is_400_and_leaves_nothing(org):
    """Was a use-after-free through the storage writer (core/http answered 400 without the
    route's teardown: the writer later resumed a freed request), and a leaked descriptor, two
    writer buffers and a .tmp file per request."""
    coach = org.client("Coach")
    pid = worker_pid()
    fds = open_fds(pid)
    for size in (512 * 1024, 2 * 1024 * 1024, 5 * 1024 * 1024):
        chunk = file_part("bad.bin", "video/mp4") + b"\1" * size
        s = connect(BASE_URL)
        s.sendall(auth_head(coach, org, "POST", "/api/files/upload",
                            "Content-Type: %s\r\nTransfer-Encoding: chunked\r\n" % MULTIPART))
        s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\nZZZZ\r\n")
        assert read_status(s) == 400
        s.close()
    wait_until(lambda: tmp_entries() == [], what="temporary files removed")
    wait_until(lambda: open_fds(pid) <= fds, what="descriptors back to %d" % fds)
    assert worker_pid() == pid


def test_chunked_upload_over_the_limit_of_what_is_outside_the_parts_is_413(org):
    """The epilogue after the closing boundary was read and dropped uncounted: a client could
    keep an upload open with it for as long as the body limit allowed."""
    coach = org.client("Coach")
    body = file_part("small.txt", "text/plain") + b"hello" + CLOSING
    s = connect(BASE_URL)
    s.sendall(auth_head(coach, org, "POST", "/api/files/upload",
                        "Content-Type: %s\r\nTransfer-Encoding: chunked\r\n" % MULTIPART))
    s.sendall(b"%x\r\n" % len(body) + body + b"\r\n")
    junk = b"e" * 32768
    try:
        s.sendall(b"%x\r\n" % len(junk) + junk + b"\r\n")
    except OSError:
        pass
    assert read_status(s) == 413
    s.close()
    wait_until(lambda: tmp_entries() == [], what="temporary files removed")


def stalled_upload(base, head, first_bytes, storage_dir):
    s = connect(base)
    s.sendall(head + first_bytes)
    wait_until(lambda: tmp_entries(storage_dir) != [], what="upload in progress")
    t0 = time.monotonic()
    status = read_status(s, timeout=20)
    took = time.monotonic() - t0
    s.close()
    return status, took


def test_uploads_stalled_past_the_deadline_are_408_and_leave_nothing(org):
    """A stall past the body deadline was answered 408 by core/http without the route's
    teardown: the writer, its descriptor and its .tmp file stayed for the worker's lifetime."""
    coach = org.client("Coach")
    with tempfile.TemporaryDirectory() as storage, \
            second_coachd(REQUEST_TIMEOUT_SECONDS=2, STORAGE_DIR=storage) as base:
        pid = worker_pid(base)
        fds = open_fds(pid, base, storage)
        # multipart upload: half the declared body, then nothing
        part = file_part("stall.mp4", "video/mp4") + b"\2" * (600 * 1024)
        head = auth_head(coach, org, "POST", "/api/files/upload",
                         "Content-Type: %s\r\nContent-Length: %d\r\n"
                         % (MULTIPART, 2 * len(part)))
        status, took = stalled_upload(base, head, part, storage)
        assert status == 408 and took < 10, (status, took)
        # local presigned PUT: the same
        c2 = Client(base_url=base, org_id=org.id)
        c2.cookies.set("auth.session_token", coach.session_token)
        size = 2 * 1024 * 1024
        p = c2.post_json("/api/files/presign", {"filename": "s.mp4", "mimeType": "video/mp4",
                                                 "sizeBytes": size}, expect=200)["data"]
        c2.close()  # its keep-alive connection is not one the stall left
        u = urllib.parse.urlsplit(p["presignedUrl"])
        head = ("PUT %s?%s HTTP/1.1\r\nHost: x\r\nContent-Type: video/mp4\r\n"
                "Content-Length: %d\r\n\r\n" % (u.path, u.query, size)).encode()
        status, took = stalled_upload(base, head, b"\3" * (size // 2), storage)
        assert status == 408 and took < 10, (status, took)
        wait_until(lambda: tmp_entries(storage) == [], what="temporary files removed")
        wait_until(lambda: open_fds(pid, base, storage) <= fds, what="descriptors back")
        assert worker_pid(base) == pid


# ---- 4: a download nobody reads -------------------------------------------------------------


def test_download_nobody_reads_is_closed_by_the_write_deadline(org):
    """Was kept forever and polled every 5 ms; now the stream write deadline closes it."""
    coach = org.client("Coach")
    with tempfile.TemporaryDirectory() as storage, \
            second_coachd(STREAM_WRITE_TIMEOUT_SECONDS=2, STORAGE_DIR=storage) as base:
        c2 = Client(base_url=base, org_id=org.id)
        c2.cookies.set("auth.session_token", coach.session_token)
        data = os.urandom(24 * 1024 * 1024)
        r = c2.post(base + "/api/files/upload", files={"file": ("big.mp4", data, "video/mp4")})
        assert r.status_code == 201, r.text
        url = c2.get_json("/api/files/%s" % r.json()["data"]["fileId"])["data"]["presignedUrl"]
        u = urllib.parse.urlsplit(url)
        url = "%s%s?%s" % (base, u.path, u.query)  # PUBLIC_URL names the main test server
        u = urllib.parse.urlsplit(url)
        pid = worker_pid(base)
        fds = open_fds(pid, base, storage)
        socks = []
        for _ in range(4):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((u.hostname, u.port))
            s.sendall(("GET %s?%s HTTP/1.1\r\nHost: x\r\n\r\n" % (u.path, u.query)).encode())
            socks.append(s)
        wait_until(lambda: open_fds(pid, base, storage) >= fds + 8, what="downloads open")
        t0 = time.monotonic()
        wait_until(lambda: open_fds(pid, base, storage) <= fds, timeout=15,
                   what="non-reading downloads closed")
        took = time.monotonic() - t0
        for s in socks:
            s.close()
        assert took < 10, took
        # A client that reads gets every byte (the deadline only ends streams that stall).
        assert hashlib.sha256(requests.get(url).content).digest() == hashlib.sha256(data).digest()
        assert worker_pid(base) == pid


# ---- 7: a stored key's content never changes ------------------------------------------------


def test_presigned_put_replayed_after_register_is_refused(org):
    """The same presigned PUT used again after register replaced the bytes that sha256Hash
    names."""
    coach = org.client("Coach")
    data = b"the original bytes"
    p = coach.post_json("/api/files/presign", {"filename": "keep.txt", "mimeType": "text/plain",
                                               "sizeBytes": len(data)}, expect=200)["data"]
    r = requests.put(p["presignedUrl"], data=data, headers={"Content-Type": "text/plain"})
    assert r.status_code == 200, r.text
    reg = coach.post_json("/api/files/register", {"storageKey": p["storageKey"],
                                                  "filename": "keep.txt",
                                                  "mimeType": "text/plain",
                                                  "sizeBytes": len(data)}, expect=201)["data"]
    evil = b"X" * len(data)
    r = requests.put(p["presignedUrl"], data=evil, headers={"Content-Type": "text/plain"})
    assert_error(r, 403, "FORBIDDEN")
    f = coach.get_json("/api/files/%s" % reg["fileId"])["data"]
    assert requests.get(f["presignedUrl"]).content == data
    assert f["sha256Hash"] == hashlib.sha256(data).hexdigest()
    wait_until(lambda: tmp_entries() == [], what="temporary files removed")
