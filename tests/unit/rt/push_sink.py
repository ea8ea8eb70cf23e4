#!/usr/bin/python3
"""Expo-compatible push endpoint for the rt/push tests (standard library only).

Listens on 127.0.0.1 (port 0 = any free port) and writes the chosen port to PORT_FILE. Every
POST is stored as OUT_DIR/<n>.json: {"path", "headers", "body" (parsed JSON)}. The answer
depends on the tokens in the batch:
  - a token containing "Status429" or "Status503": the whole request gets that status;
  - otherwise 200 {"data": [ticket per message]}, where a token containing "Unregistered"
    gets {"status":"error","details":{"error":"DeviceNotRegistered"}} and the others
    {"status":"ok","id":...}.

usage: push_sink.py PORT_FILE OUT_DIR [PORT]
"""
import http.server
import json
import os
import sys
import threading
import uuid

LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    out_dir = "."

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with LOCK:
            n = len([f for f in os.listdir(self.out_dir) if f.endswith(".json")])
            tmp = os.path.join(self.out_dir, ".%d.tmp" % n)
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": body}, f, ensure_ascii=False)
            os.rename(tmp, os.path.join(self.out_dir, "%d.json" % n))
        msgs = body if isinstance(body, list) else [body] if isinstance(body, dict) else []
        tokens = [str(m.get("to", "")) for m in msgs if isinstance(m, dict)]
        for status in (429, 503):
            if any(("Status%d" % status) in t for t in tokens):
                self.answer(status, {"errors": [{"code": "TOO_MANY_REQUESTS" if status == 429
                                                 else "INTERNAL", "message": "try later"}]})
                return
        tickets = []
        for t in tokens:
            if "Unregistered" in t:
                tickets.append({"status": "error",
                                "message": '"%s" is not a registered push notification recipient' % t,
                                "details": {"error": "DeviceNotRegistered"}})
            else:
                tickets.append({"status": "ok", "id": str(uuid.uuid4())})
        self.answer(200, {"data": tickets})

    def answer(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    port_file, out_dir = sys.argv[1], sys.argv[2]
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    os.makedirs(out_dir, exist_ok=True)
    Handler.out_dir = out_dir
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
