#!/usr/bin/python3
"""A stand-in for an Expo-compatible push endpoint, for tests.

    push_sink.py --dir DIR [--host 127.0.0.1] [--port 0] [--port-file FILE] [--fail-file FILE]

Every POST is stored as DIR/<time>-<n>.json: {"path", "headers", "body"} where body is the
parsed JSON request (or the raw text when it is not JSON). The answer follows Expo's push API:
one ticket per message, {"status": "ok", "id": ...}, except for a message whose `to` contains
"unregistered", which gets {"status": "error", "details": {"error": "DeviceNotRegistered"}}.
While the --fail-file exists, every POST is answered 500 and stored nowhere (an endpoint that
is down: nothing was delivered), for scripts/faults.
Python standard library only.
"""
import argparse
import itertools
import json
import os
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_seq = itertools.count(1)
_lock = threading.Lock()


def ticket(msg):
    to = msg.get("to") if isinstance(msg, dict) else None
    tokens = to if isinstance(to, list) else [to]
    if any(isinstance(t, str) and "unregistered" in t for t in tokens):
        return {"status": "error", "message": "not a registered push notification recipient",
                "details": {"error": "DeviceNotRegistered"}}
    return {"status": "ok", "id": str(uuid.uuid4())}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    maildir = "."
    fail_file = None

    def log_message(self, fmt, *args):
        print(time.strftime("%H:%M:%S"), fmt % args, file=sys.stderr, flush=True)

    def answer(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(200, {"ok": True})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.fail_file and os.path.exists(self.fail_file):
            self.answer(500, {"errors": [{"code": "INTERNAL_SERVER_ERROR",
                                          "message": "the sink is told to fail"}]})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        record = {"path": self.path, "headers": dict(self.headers.items()), "body": body}
        with _lock:
            name = "%d-%06d" % (time.time_ns() // 1000, next(_seq))
        tmp = os.path.join(self.maildir, "." + name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.rename(tmp, os.path.join(self.maildir, name + ".json"))
        if isinstance(body, list):
            self.answer(200, {"data": [ticket(m) for m in body]})
        elif isinstance(body, dict):
            self.answer(200, {"data": ticket(body)})
        else:
            self.answer(400, {"errors": [{"code": "VALIDATION_ERROR", "message": "JSON expected"}]})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--fail-file")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    Handler.maildir = args.dir
    Handler.fail_file = args.fail_file
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(args.port_file + ".tmp", args.port_file)
    print("push sink on %s:%d storing into %s" % (args.host, port, args.dir), file=sys.stderr,
          flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()


if __name__ == "__main__":
    main()
