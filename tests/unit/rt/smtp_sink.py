#!/usr/bin/python3
"""SMTP sink for the rt/mail tests (standard library only, asyncio).

Listens on 127.0.0.1 (port 0 = any free port), accepts every message (AUTH PLAIN/LOGIN with
any credentials, no TLS), and stores each one as OUT_DIR/<n>.json:
    {"mail_from", "rcpt_tos", "subject" (decoded), "text", "html", "headers", "raw"}
The chosen port is written to PORT_FILE once the socket listens.

usage: smtp_sink.py PORT_FILE OUT_DIR [PORT]
"""
import asyncio
import email
import email.policy
import json
import os
import sys


class Session:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.reset()

    def reset(self):
        self.mail_from = None
        self.rcpt = []


def save(out_dir, sess, raw):
    # Local delivery turns the wire's CRLF into LF, as an MTA would.
    msg = email.message_from_bytes(raw.replace(b"\r\n", b"\n"), policy=email.policy.default)
    text = html = None
    for part in msg.walk():
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        if ctype == "text/plain" and text is None:
            text = part.get_content()
        elif ctype == "text/html" and html is None:
            html = part.get_content()
    doc = {
        "mail_from": sess.mail_from,
        "rcpt_tos": sess.rcpt,
        "subject": str(msg["subject"]),
        "text": text,
        "html": html,
        "headers": {k: str(v) for k, v in msg.items()},
        "raw": raw.decode("utf-8", "replace"),
    }
    n = len([f for f in os.listdir(out_dir) if f.endswith(".json")])
    tmp = os.path.join(out_dir, ".%d.tmp" % n)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    os.rename(tmp, os.path.join(out_dir, "%d.json" % n))


async def handle(reader, writer, out_dir):
    sess = Session(out_dir)

    async def reply(line):
        writer.write((line + "\r\n").encode())
        await writer.drain()

    await reply("220 sink ESMTP")
    while True:
        line = await reader.readline()
        if not line:
            break
        cmd = line.decode("utf-8", "replace").rstrip("\r\n")
        verb = cmd.split(" ", 1)[0].upper()
        arg = cmd[len(verb):].strip()
        if verb == "EHLO":
            await reply("250-sink\r\n250-8BITMIME\r\n250-AUTH PLAIN LOGIN\r\n250 SIZE 10485760")
        elif verb == "HELO":
            await reply("250 sink")
        elif verb == "AUTH":
            mech = arg.split(" ")[0].upper()
            if mech == "LOGIN":
                await reply("334 VXNlcm5hbWU6")
                await reader.readline()
                await reply("334 UGFzc3dvcmQ6")
                await reader.readline()
            elif mech == "PLAIN" and len(arg.split(" ")) == 1:
                await reply("334 ")
                await reader.readline()
            await reply("235 2.7.0 Authentication successful")
        elif verb == "MAIL":
            sess.mail_from = arg[5:].strip().split(" ")[0].strip("<>")
            await reply("250 OK")
        elif verb == "RCPT":
            sess.rcpt.append(arg[3:].strip().strip("<>"))
            await reply("250 OK")
        elif verb == "DATA":
            await reply("354 End data with <CR><LF>.<CR><LF>")
            lines = []
            while True:
                l = await reader.readline()
                if not l or l in (b".\r\n", b".\n"):
                    break
                if l.startswith(b".."):
                    l = l[1:]
                lines.append(l)
            save(out_dir, sess, b"".join(lines))
            sess.reset()
            await reply("250 OK queued")
        elif verb == "RSET":
            sess.reset()
            await reply("250 OK")
        elif verb in ("NOOP", "VRFY", "HELP"):
            await reply("250 OK")
        elif verb == "QUIT":
            await reply("221 Bye")
            break
        else:
            await reply("502 Command not implemented")
    writer.close()


async def main():
    port_file, out_dir = sys.argv[1], sys.argv[2]
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    os.makedirs(out_dir, exist_ok=True)
    server = await asyncio.start_server(lambda r, w: handle(r, w, out_dir), "127.0.0.1", port)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    os.rename(tmp, port_file)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
