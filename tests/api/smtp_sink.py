#!/usr/bin/python3
"""A small SMTP server for tests: accepts every message and stores it as an .eml file.

    smtp_sink.py --dir DIR [--host 127.0.0.1] [--port 0] [--port-file FILE]

Each message is written to DIR/<time>-<n>.eml (written to a temporary name, then renamed, so
readers never see half a message), with two headers added on top: X-Sink-Mail-From and
X-Sink-Rcpt-To (the envelope). It speaks EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, VRFY, QUIT
and accepts AUTH PLAIN and AUTH LOGIN with any credentials. No TLS. Python standard library
only. With --port 0 it picks a free port and writes it to --port-file once it listens.
"""
import argparse
import asyncio
import base64
import itertools
import os
import signal
import sys
import time

MAX_SIZE = 32 * 1024 * 1024
_seq = itertools.count(1)


def log(msg):
    print(time.strftime("%H:%M:%S"), msg, file=sys.stderr, flush=True)


def store(maildir, mail_from, rcpts, data):
    name = "%d-%06d-%d" % (time.time_ns() // 1000, next(_seq), os.getpid())
    tmp = os.path.join(maildir, "." + name + ".tmp")
    head = "X-Sink-Mail-From: <%s>\r\nX-Sink-Rcpt-To: %s\r\n" % (
        mail_from, ", ".join("<%s>" % r for r in rcpts))
    with open(tmp, "wb") as f:
        f.write(head.encode("utf-8", "replace"))
        f.write(data)
    path = os.path.join(maildir, name + ".eml")
    os.rename(tmp, path)
    return path


def addr_of(arg, prefix):
    """'FROM:<a@b> SIZE=10' -> 'a@b'; None when the syntax is wrong."""
    if not arg.upper().startswith(prefix):
        return None
    rest = arg[len(prefix):].strip()
    if rest.startswith("<"):
        end = rest.find(">")
        return rest[1:end] if end >= 0 else None
    return rest.split(" ", 1)[0] if rest else None


class Session:
    def __init__(self, reader, writer, maildir):
        self.r, self.w, self.maildir = reader, writer, maildir
        self.reset()

    def reset(self):
        self.mail_from = None
        self.rcpts = []

    async def send(self, line):
        self.w.write(line.encode() + b"\r\n")
        await self.w.drain()

    async def readline(self):
        line = await self.r.readline()
        if not line:
            raise ConnectionResetError
        return line.rstrip(b"\r\n").decode("utf-8", "replace")

    async def read_data(self):
        lines, size = [], 0
        while True:
            line = await self.r.readline()
            if not line:
                raise ConnectionResetError
            if line in (b".\r\n", b".\n"):
                break
            if line.startswith(b"."):
                line = line[1:]  # dot-unstuffing
            size += len(line)
            if size <= MAX_SIZE:
                lines.append(line)
        return b"".join(lines), size

    async def auth(self, arg):
        parts = arg.split()
        mech = parts[0].upper() if parts else ""
        if mech == "PLAIN":
            if len(parts) < 2:
                await self.send("334 ")
                await self.readline()
        elif mech == "LOGIN":
            if len(parts) < 2:
                await self.send("334 " + base64.b64encode(b"Username:").decode())
                await self.readline()
            await self.send("334 " + base64.b64encode(b"Password:").decode())
            await self.readline()
        else:
            await self.send("504 5.5.4 Unrecognized authentication type")
            return
        await self.send("235 2.7.0 Authentication successful")

    async def run(self):
        await self.send("220 coachd-test-sink ESMTP ready")
        while True:
            line = await self.readline()
            verb, _, arg = line.partition(" ")
            verb = verb.upper()
            if verb == "EHLO":
                self.reset()
                for ext in ("250-coachd-test-sink", "250-8BITMIME", "250-SMTPUTF8",
                            "250-SIZE %d" % MAX_SIZE, "250-AUTH PLAIN LOGIN"):
                    self.w.write(ext.encode() + b"\r\n")
                await self.send("250 HELP")
            elif verb == "HELO":
                self.reset()
                await self.send("250 coachd-test-sink")
            elif verb == "AUTH":
                await self.auth(arg)
            elif verb == "MAIL":
                addr = addr_of(arg, "FROM:")
                if addr is None:
                    await self.send("501 5.5.4 Syntax: MAIL FROM:<address>")
                else:
                    self.reset()
                    self.mail_from = addr
                    await self.send("250 2.1.0 OK")
            elif verb == "RCPT":
                addr = addr_of(arg, "TO:")
                if self.mail_from is None:
                    await self.send("503 5.5.1 Need MAIL first")
                elif not addr:
                    await self.send("501 5.5.4 Syntax: RCPT TO:<address>")
                else:
                    self.rcpts.append(addr)
                    await self.send("250 2.1.5 OK")
            elif verb == "DATA":
                if not self.rcpts:
                    await self.send("503 5.5.1 Need RCPT first")
                    continue
                await self.send("354 End data with <CR><LF>.<CR><LF>")
                data, size = await self.read_data()
                if size > MAX_SIZE:
                    await self.send("552 5.3.4 Message too big")
                else:
                    path = store(self.maildir, self.mail_from, self.rcpts, data)
                    log("stored %s from <%s> to %s" % (os.path.basename(path), self.mail_from,
                                                       ", ".join(self.rcpts)))
                    await self.send("250 2.0.0 OK queued as %s" % os.path.basename(path))
                self.reset()
            elif verb == "RSET":
                self.reset()
                await self.send("250 2.0.0 OK")
            elif verb == "NOOP":
                await self.send("250 2.0.0 OK")
            elif verb == "VRFY":
                await self.send("252 2.0.0 Cannot VRFY user")
            elif verb == "QUIT":
                await self.send("221 2.0.0 Bye")
                return
            else:
                await self.send("502 5.5.2 Command not recognized")


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=os.environ.get("COACHD_MAIL_DIR"), required=False)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    args = ap.parse_args()
    if not args.dir:
        ap.error("--dir (or COACHD_MAIL_DIR) is required")
    os.makedirs(args.dir, exist_ok=True)

    async def handle(reader, writer):
        try:
            await Session(reader, writer, args.dir).run()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as e:  # keep serving other clients
            log("session error: %r" % e)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, args.host, args.port)
    port = server.sockets[0].getsockname()[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    log("SMTP sink on %s:%d storing into %s" % (args.host, port, args.dir))

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    log("SMTP sink stopped")


if __name__ == "__main__":
    asyncio.run(main())
