#!/usr/bin/env python3
"""Writes docs/openapi.json, the OpenAPI 3.1 document of coachd, from the route tables in
routes/*.c (every method and path, its parameters and its authentication) and the details kept
below (bodies and answers of the main endpoints, the error shape, the event streams).

    scripts/gen_openapi.py           rewrite docs/openapi.json
    scripts/gen_openapi.py --check   exit 1 when docs/openapi.json is not what it would write

Run it after adding a route; the API tests fail while the document misses one."""
import glob
import json
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
OUT = os.path.join(ROOT, "docs", "openapi.json")

ROW = re.compile(r'\{\s*HTTP_M_(\w+),\s*"(/[^"]*)",\s*(\w+),\s*(AUTH_\w+),\s*(\w+)')


def routes():
    """[(method, pattern, auth, role, file)] of every route table row."""
    out = []
    for f in sorted(glob.glob(os.path.join(ROOT, "routes", "*.c"))):
        for m in ROW.finditer(open(f, encoding="utf-8").read()):
            out.append((m.group(1).lower(), m.group(2), m.group(4), m.group(5),
                        os.path.basename(f)))
    return out


def oa_path(pattern):
    return re.sub(r":(\w+)", r"{\1}", pattern)


def error_codes():
    """The codes of docs/api.md's table of error codes (section "Errors"), in its order: the
    only codes the API answers (tests/api/test_error_codes.py holds the sources to it)."""
    text = open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8").read()
    section = text[text.index("## Errors"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"^ *\| `([A-Z][A-Z0-9_]*)` \|", section, re.M)


ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "enum": error_codes(),
                         "description": "docs/api.md, \"Errors\", says when each is answered"},
                "message": {"type": "string"},
                "details": {"type": "array", "items": {
                    "type": "object", "required": ["field", "message"],
                    "properties": {"field": {"type": "string"}, "message": {"type": "string"}}}},
            },
        },
        "retryAfterSeconds": {"type": "integer", "minimum": 0},
    },
}

USER = {"type": "object", "required": ["id", "email", "name"],
        "properties": {"id": {"type": "string"}, "email": {"type": "string"},
                       "name": {"type": "string"}, "emailVerified": {"type": "boolean"},
                       "createdAt": {"type": "string"}}}
SESSION = {"type": "object", "required": ["id", "userId", "expiresAt"],
           "properties": {"id": {"type": "string"}, "userId": {"type": "string"},
                          "expiresAt": {"type": "string"}}}
AUTH_RESULT = {"type": "object", "required": ["user"],
               "properties": {"user": {"$ref": "#/components/schemas/User"},
                              "session": {"$ref": "#/components/schemas/Session"}}}
SESSION_OR_NULL = {"type": "object", "required": ["session", "user"], "properties": {
    "session": {"oneOf": [{"$ref": "#/components/schemas/Session"}, {"type": "null"}]},
    "user": {"oneOf": [{"$ref": "#/components/schemas/User"}, {"type": "null"}]}}}
ANY_JSON = {"description": "JSON answer (not described field by field yet)"}

EVENTS = ("The stream is text/event-stream. The first frame is `retry: 3000`; then events as "
          "`id`, `event` and `data` (one JSON object) lines, and a `ping` event every 25 seconds. "
          "Event types: chat-message, chat-message-updated, chat-message-deleted, "
          "chat-reaction-added, chat-reaction-removed, session-update, call-reaction "
          "(mentorship stream), ping, reset; one event is described by "
          "components/schemas/StreamEvent (`x-itemSchema`, OpenAPI 3.2's itemSchema). Every "
          "event's `id` is its id in this stream's history (`<ms>-<seq>`, increasing); a ping "
          "carries the id of the stream's last event. A reconnect with `Last-Event-ID` (or "
          "`?lastEventId=`) gets the events it missed, in order and once, before live ones; an "
          "id the history cannot serve (older than the last 1000 events and 10 minutes, unknown, "
          "or Redis unavailable) gets one `reset` event instead: refetch, then go on. The stream "
          "closes when its session ends, the user becomes inactive or loses access. See "
          "docs/api.md, \"Event ids, replay and reset\".")

STREAM_PARAMS = [
    {"name": "Last-Event-ID", "in": "header", "required": False,
     "description": "Id of the last event received on this stream: the events after it are "
                    "replayed first (EventSource sends it on its own reconnects)",
     "schema": {"type": "string"}},
    {"name": "lastEventId", "in": "query", "required": False,
     "description": "Same as Last-Event-ID, for a browser EventSource opened anew (it cannot "
                    "set headers); the header wins when both are sent",
     "schema": {"type": "string"}},
]

EVENT_ID = {"type": "string", "pattern": "^[0-9]+-[0-9]+$"}


def event(names, data, desc):
    return {"type": "object", "description": desc, "required": ["event", "data"],
            "properties": {"id": EVENT_ID, "event": {"enum": names}, "data": data}}


STREAM_EVENT = {"oneOf": [
    event(["chat-message", "chat-message-updated"], {"type": "object"},
          "A chat message (INTERFACE.md ChatMessage)"),
    event(["chat-message-deleted", "chat-reaction-added", "chat-reaction-removed"],
          {"type": "object"}, "A chat change"),
    event(["session-update"], {"type": "object", "required": ["action", "mentorshipId"],
                               "properties": {"action": {"const": "updated"},
                                              "mentorshipId": {"type": "string"}}},
          "A session of the mentorship changed"),
    event(["call-reaction"], {"type": "object", "required": ["emoji", "userId", "sessionId"],
                              "properties": {"emoji": {"type": "string"},
                                             "userId": {"type": "string"},
                                             "sessionId": {"type": "string"}}},
          "An emoji reaction during a call (mentorship stream)"),
    event(["ping"], {"const": ""}, "Every 25 seconds; its id is the stream's position"),
    event(["reset"], {"type": "object", "required": ["reason"], "properties": {
        "reason": {"enum": ["too-old", "unknown-id", "unavailable"]}}},
        "Events may have been missed and cannot be replayed: refetch (GET the chat messages "
        "and what the screen shows), then go on with the events that follow"),
]}


def stream_op(summary):
    return {"summary": summary, "description": EVENTS, "parameters": STREAM_PARAMS,
            "responses": {"200": {"description": "Event stream", "content": {
                "text/event-stream": {
                    # The stream is text; each event in it is a StreamEvent (OpenAPI 3.2 says so
                    # with itemSchema, 3.1 has only the extension and JSON Schema's
                    # contentSchema).
                    "schema": {"type": "string", "contentMediaType": "text/event-stream",
                               "contentSchema": {"$ref": "#/components/schemas/StreamEvent"}},
                    "x-itemSchema": {"$ref": "#/components/schemas/StreamEvent"}}}}}}


def body(props, required):
    return {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": required,
        "properties": {k: {"type": v} for k, v in props.items()}}}}}


def ok(schema=None, status="200", desc="OK"):
    if schema is None:
        return {status: {"description": desc, "content": {"application/json": {"schema": {}}}}}
    return {status: {"description": desc, "content": {"application/json": {"schema": schema}}}}


CHECK = {"enum": ["ok", "error"]}
HEALTH = {"type": "object", "required": ["status", "version", "checks", "env"], "properties": {
    "status": {"enum": ["ok", "degraded"]}, "version": {"type": "string"},
    "checks": {"type": "object",
               "required": ["database", "cache", "storage", "mail", "video", "env"],
               "properties": {k: CHECK for k in
                              ("database", "cache", "storage", "mail", "video", "env")}},
    "env": {"type": "object", "required": ["environment", "missingRequired", "missingGroups"],
            "properties": {"environment": {"enum": ["development", "deployed"]},
                           "missingRequired": {"type": "array", "items": {"type": "string"}},
                           "missingGroups": {"type": "array", "items": {"type": "string"}}}}}}
PROBE_OK = {"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}},
            "additionalProperties": False}
PROBE_DOWN = {"type": "object", "required": ["status"],
              "properties": {"status": {"const": "unavailable"}}, "additionalProperties": False}


# Details of operations beyond what the route table says: (method, pattern) -> fields.
DETAILS = {
    ("post", "/api/auth/sign-up/email"): {
        "summary": "Create an account and sign in",
        "requestBody": body({"email": "string", "password": "string", "name": "string",
                             "preferredLanguage": "string"}, ["email", "password", "name"]),
        "responses": ok({"$ref": "#/components/schemas/AuthResult"})},
    ("post", "/api/auth/sign-in/email"): {
        "summary": "Sign in with email and password; sets the session cookie",
        "requestBody": body({"email": "string", "password": "string"}, ["email", "password"]),
        "responses": ok({"$ref": "#/components/schemas/AuthResult"})},
    ("get", "/api/auth/session"): {
        "summary": "The caller's session, or nulls when signed out",
        "responses": ok({"$ref": "#/components/schemas/SessionOrNull"})},
    ("get", "/api/auth/get-session"): {
        "summary": "better-auth's client path: the session, or null when signed out",
        "responses": ok({"oneOf": [{"$ref": "#/components/schemas/SessionOrNull"},
                                   {"type": "null"}]})},
    ("post", "/api/auth/forget-password"): {
        "summary": "Send a password reset link (200 whether or not the email exists)",
        "requestBody": body({"email": "string", "redirectTo": "string"}, ["email"])},
    ("post", "/api/auth/request-password-reset"): {
        "summary": "better-auth's client path for forget-password",
        "requestBody": body({"email": "string", "redirectTo": "string"}, ["email"])},
    ("post", "/api/auth/reset-password"): {
        "summary": "Set a new password with a reset token",
        "requestBody": body({"token": "string", "newPassword": "string"},
                            ["token", "newPassword"])},
    ("post", "/api/users/me/password"): {
        "summary": "Change the caller's password; other sessions end",
        "requestBody": body({"currentPassword": "string", "newPassword": "string"},
                            ["currentPassword", "newPassword"])},
    ("post", "/api/auth/change-password"): {
        "summary": "better-auth's client path for POST /api/users/me/password",
        "requestBody": body({"currentPassword": "string", "newPassword": "string",
                             "revokeOtherSessions": "boolean"},
                            ["currentPassword", "newPassword"])},
    ("get", "/api/auth/verify-email"): {
        "summary": "Mark the email verified; 302 to the web app",
        "responses": {"302": {"description": "Redirect to FRONTEND_URL/email-verification"}}},
    ("get", "/api/events/users/me/events"): stream_op("The caller's event stream (SSE)"),
    ("get", "/api/events/mentorships/:mentorshipId/events"):
        stream_op("A mentorship's event stream (SSE)"),
    ("get", "/metrics"): {
        "summary": "Prometheus metrics of every worker (Bearer METRICS_TOKEN on the main port, "
                   "404 when unset; without a token on METRICS_PORT's own listener)",
        "security": [{"metricsToken": []}],
        "responses": {"200": {"description": "Prometheus text format 0.0.4",
                              "content": {"text/plain": {"schema": {"type": "string"}}}}}},
    ("post", "/api/files/presign"): {
        "summary": "A presigned PUT URL for a new storage key (then PUT the bytes, then register)",
        "requestBody": body({"filename": "string", "mimeType": "string", "sizeBytes": "integer",
                             "prefix": "string"}, ["filename", "mimeType", "sizeBytes"]),
        "responses": ok({"type": "object", "required": ["data"], "properties": {"data": {
            "type": "object",
            "required": ["presignedUrl", "storageKey", "expiresIn", "uploadHeaders"],
            "properties": {
                "presignedUrl": {"type": "string"}, "storageKey": {"type": "string"},
                "expiresIn": {"type": "integer"},
                "uploadHeaders": {
                    "description": "The headers the PUT to presignedUrl must send, exactly as "
                                   "given: Content-Type, and If-None-Match: * on the s3 driver "
                                   "(S3 then refuses to overwrite the object)",
                    "type": "object", "required": ["Content-Type"],
                    "properties": {"Content-Type": {"type": "string"},
                                   "If-None-Match": {"const": "*"}},
                    "additionalProperties": False}}}}})},
    ("get", "/api/health"): {
        "summary": "Every check (X-Client-Key); 503 when one fails (development: database or "
                   "cache). Not for load balancers: use /api/health/ready",
        "parameters": [{"name": "X-Client-Key", "in": "header", "required": False,
                        "schema": {"type": "string"}}],
        "responses": {**ok(HEALTH), **ok(HEALTH, "503", "Degraded")}},
    ("post", "/api/setup/first-run"): {
        "summary": "Create the first PlatformAdmin, once (production: X-Setup-Token, else 403)",
        "parameters": [{"name": "X-Setup-Token", "in": "header", "required": False,
                        "description": "Production only: must equal SETUP_TOKEN",
                        "schema": {"type": "string"}}],
        "requestBody": body({"email": "string", "password": "string", "name": "string",
                             "preferredLanguage": "string"}, ["email", "password", "name"])},
    ("get", "/api/health/live"): {
        "summary": "Liveness for orchestrators: 200 while the process serves (no client key)",
        "responses": ok(PROBE_OK)},
    ("get", "/api/health/ready"): {
        "summary": "Readiness for load balancers: 200 when the database and Redis answer and "
                   "the migrations are applied, else 503 (no client key; mail, storage and "
                   "video never fail it)",
        "responses": {**ok(PROBE_OK), **ok(PROBE_DOWN, "503", "Not ready")}},
    ("get", "/api/openapi.json"): {
        "summary": "This document",
        "responses": ok({"type": "object", "required": ["openapi", "paths"],
                         "properties": {"openapi": {"type": "string"},
                                        "paths": {"type": "object"}}})},
    ("get", "/api/docs"): {
        "summary": "The API reference: an HTML page that renders this document in the browser "
                   "(Redoc, served by /api/docs/{bundle}); a short page linking to this document "
                   "when the binary was built without the renderer",
        "responses": {"200": {"description": "HTML page (Content-Security-Policy: this origin "
                                             "only)",
                              "content": {"text/html": {"schema": {"type": "string"}}}}}},
    ("get", "/api/docs/:bundle"): {
        "summary": "The reference page's renderer script, named by its content hash "
                   "(redoc.<hash>.js, as the page links it): cached as immutable, gzipped when "
                   "accepted; 304 for a matching If-None-Match",
        "responses": {"200": {"description": "JavaScript",
                              "content": {"application/javascript": {
                                  "schema": {"type": "string"}}}},
                      "304": {"description": "Not modified"}}},
}

ERROR_STATUSES = {
    "AUTH_PUBLIC": ["400", "401", "403", "404", "409", "410", "422", "429"],
    "AUTH_OPTIONAL": ["400", "401", "403", "404", "409", "429"],
    "AUTH_SESSION": ["400", "401", "403", "404", "409", "422", "429"],
    "AUTH_ORG": ["400", "401", "403", "404", "409", "422", "429"],
}


def build():
    paths = {}
    for method, pattern, auth, role, src in routes():
        p = paths.setdefault(oa_path(pattern), {})
        d = dict(DETAILS.get((method, pattern), {}))
        op = {"operationId": "%s_%s" % (method, re.sub(r"[^A-Za-z0-9]+", "_", pattern).strip("_")),
              "summary": d.pop("summary", "%s %s" % (method.upper(), pattern)),
              "tags": [src[:-2]]}
        params = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                  for n in re.findall(r":(\w+)", pattern)]
        params += d.pop("parameters", [])
        if auth == "AUTH_ORG":
            params.append({"name": "X-Organization-Id", "in": "header", "required": False,
                           "description": "Organization context", "schema": {"type": "string"}})
        if params:
            op["parameters"] = params
        if auth in ("AUTH_SESSION", "AUTH_ORG"):
            op["security"] = [{"sessionCookie": []}]
        elif auth == "AUTH_OPTIONAL":
            op["security"] = [{"sessionCookie": []}, {}]
        else:
            op["security"] = []
        responses = d.pop("responses", None) or {
            "200": {"description": "Success", "content": {"application/json": {"schema": {}}}},
            "201": {"description": "Created", "content": {"application/json": {"schema": {}}}},
            "204": {"description": "No content"}}
        if pattern == "/api/files/local":
            responses = {"200": {"description": "File bytes"}, "201": {"description": "Stored"},
                         "204": {"description": "Stored"}}
        for st in ERROR_STATUSES[auth] + ["413", "415", "500", "503"]:
            responses.setdefault(st, {"$ref": "#/components/responses/Error"})
        op["responses"] = responses
        op.update(d)
        p[method] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "coachd API", "version": "1",
                 "description": "Organization-based coaching backend. Errors share one shape "
                                "(components/schemas/Error). See docs/api.md."},
        "servers": [{"url": "/"}],
        "security": [{"sessionCookie": []}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": {"Error": ERROR, "User": USER, "Session": SESSION,
                        "AuthResult": AUTH_RESULT, "SessionOrNull": SESSION_OR_NULL,
                        "StreamEvent": STREAM_EVENT},
            "responses": {"Error": {"description": "Error (DECISIONS.md \"Errors\")",
                                    "content": {"application/json": {
                                        "schema": {"$ref": "#/components/schemas/Error"}}}}},
            "securitySchemes": {
                "sessionCookie": {"type": "apiKey", "in": "cookie", "name": "auth.session_token"},
                "metricsToken": {"type": "http", "scheme": "bearer"}},
        },
    }


def main():
    text = json.dumps(build(), indent=1, ensure_ascii=False) + "\n"
    if "--check" in sys.argv:
        if open(OUT, encoding="utf-8").read() != text:
            print("docs/openapi.json is stale: run scripts/gen_openapi.py", file=sys.stderr)
            return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
