#!/usr/bin/env python3
"""Writes docs/openapi.json, the OpenAPI 3.1 document of coachd, from the route tables in
routes/*.c (every method and path, its authentication and minimum role) and the contract files
routes/schemas/<area>.json (one per route file: its operations' parameters, bodies, answers and
errors, and the component schemas it owns; routes/README.md, "The contract", has the format).

    scripts/gen_openapi.py           rewrite docs/openapi.json
    scripts/gen_openapi.py --check   exit 1 when docs/openapi.json is not what it would write
    scripts/gen_openapi.py --stats   how much of the document is described (and what is not)

Run it after adding a route or changing a contract file; the API tests fail while the document
is stale, and this script fails while a route has no operation or an operation no route."""
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
          "A chat message (docs/api.md, \"Chat\")"),
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
}

ERROR_STATUSES = {
    "AUTH_PUBLIC": ["400", "401", "403", "404", "409", "410", "422", "429"],
    "AUTH_OPTIONAL": ["400", "401", "403", "404", "409", "429"],
    "AUTH_SESSION": ["400", "401", "403", "404", "409", "422", "429"],
    "AUTH_ORG": ["400", "401", "403", "404", "409", "422", "429"],
}


SCHEMA_DIR = os.path.join(ROOT, "routes", "schemas")
ERROR_REF = {"$ref": "#/components/schemas/Error"}
UUID = {"type": "string", "format": "uuid"}
# Statuses of the connection rather than of an operation (request head or body too slow, an
# Expect other than 100-continue, request head too large): any route may answer them, so they are
# described once in info.description, not per operation.
TRANSPORT_STATUSES = ("408", "417", "431")


class ContractError(Exception):
    pass


def load_areas():
    """{area: contract} of every routes/schemas/<area>.json."""
    areas = {}
    for f in sorted(glob.glob(os.path.join(SCHEMA_DIR, "*.json"))):
        with open(f, encoding="utf-8") as fh:
            try:
                areas[os.path.basename(f)[:-5]] = json.load(fh)
            except ValueError as e:
                raise ContractError("%s: %s" % (os.path.relpath(f, ROOT), e)) from None
    return areas


def components(areas):
    out = {}
    for area, c in areas.items():
        for name, schema in c.get("schemas", {}).items():
            if name in out:
                raise ContractError("component %s is defined twice (%s.json)" % (name, area))
            out[name] = schema
    return out


def error_response(when):
    return {"description": when, "content": {"application/json": {"schema": ERROR_REF}}}


def media(entry, default_type="application/json"):
    """The content map of a request or response entry: "schema" (JSON) or "content"."""
    if "content" in entry:
        return entry["content"]
    if "schema" in entry:
        return {default_type: {"schema": entry["schema"]}}
    return None


def described_op(spec, method, pattern, auth, role):
    """The OpenAPI operation of one route from its contract entry."""
    op = {"summary": spec["summary"]}
    if "description" in spec:
        op["description"] = spec["description"]
    params = []
    path_spec = spec.get("path", {})
    names = re.findall(r":(\w+)", pattern)
    for n in path_spec:
        if n not in names:
            raise ContractError("%s %s: path parameter %s is not in the pattern"
                                % (method.upper(), pattern, n))
    for n in names:
        p = path_spec.get(n, {})
        params.append({"name": n, "in": "path", "required": True,
                       **({"description": p["description"]} if "description" in p else {}),
                       "schema": p.get("schema", UUID)})
    for where, key in (("query", "query"), ("header", "headers")):
        for n, p in spec.get(key, {}).items():
            params.append({"name": n, "in": where, "required": bool(p.get("required", False)),
                           **({"description": p["description"]} if "description" in p else {}),
                           "schema": p["schema"]})
    if auth == "AUTH_ORG":
        params.append({"name": "X-Organization-Id", "in": "header", "required": False,
                       "description": "The organization this request acts in (else the "
                                      "caller's current organization)",
                       "schema": UUID})
    if params:
        op["parameters"] = params
    json_body = False
    if "request" in spec:
        req = spec["request"]
        content = media(req)
        json_body = "application/json" in content
        op["requestBody"] = {"required": req.get("required", True), "content": content,
                             **({"description": req["description"]}
                                if "description" in req else {})}
    responses = {}
    for status, r in spec["responses"].items():
        out = {"description": r["description"]}
        content = media(r)
        if content:
            out["content"] = content
        if "headers" in r:
            out["headers"] = r["headers"]
        responses[status] = out
    for status, when in spec.get("errors", {}).items():
        responses.setdefault(status, error_response(when))
    auto = []
    if params or "request" in spec or auth == "AUTH_ORG":
        auto.append(("400", "A malformed parameter or body field (`details` names each one)"
                     + ("; ORG_CONTEXT_REQUIRED without organization context"
                        if auth == "AUTH_ORG" else "")))
    if auth in ("AUTH_SESSION", "AUTH_ORG"):
        auto.append(("401", "No valid session"))
        auto.append(("403", "The caller may not do this (role, organization access), or "
                            "INVITE_GATE while invitations are pending"))
    if json_body:
        auto.append(("413", "The body is over the route's limit"))
        auto.append(("415", "The body is not application/json"))
    auto += [("429", "Rate limited (`retryAfterSeconds`, Retry-After)"),
             ("500", "A fault of the server"),
             ("503", "A dependency is unavailable, or the connection caps are reached")]
    for status, when in auto:
        responses.setdefault(status, error_response(when))
    op["responses"] = dict(sorted(responses.items()))
    for key in ("operationId", "security"):
        if key in spec:
            op[key] = spec[key]
    return op


ROLE_NAMES = {"ROLE_TEACHER": "Teacher", "ROLE_COACH": "Coach", "ROLE_MANAGER": "Manager",
              "ROLE_ORG_ADMIN": "OrganizationAdmin", "ROLE_PLATFORM_ADMIN": "PlatformAdmin",
              "ROLE_OWNER": "Owner"}


def legacy_op(method, pattern, auth):
    """An operation of a route whose area has no contract file yet (loose answers)."""
    d = dict(DETAILS.get((method, pattern), {}))
    op = {"summary": d.pop("summary", "%s %s" % (method.upper(), pattern))}
    params = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
              for n in re.findall(r":(\w+)", pattern)]
    params += d.pop("parameters", [])
    if auth == "AUTH_ORG":
        params.append({"name": "X-Organization-Id", "in": "header", "required": False,
                       "description": "Organization context", "schema": {"type": "string"}})
    if params:
        op["parameters"] = params
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
    return op


def refs(node):
    """The component names node refers to."""
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/components/schemas/"):
            yield node["$ref"].rsplit("/", 1)[1]
        for v in node.values():
            yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def used(schemas, paths):
    """The schemas the operations use, directly or through other schemas (common.json offers
    shapes an area may not use yet; an unused component is not written). A ref to a component no
    file defines fails."""
    out, todo = {"Error": schemas["Error"]}, list(refs(paths))
    while todo:
        name = todo.pop()
        if name in out:
            continue
        if name not in schemas:
            raise ContractError("$ref to undefined component %s" % name)
        out[name] = schemas[name]
        todo.extend(refs(schemas[name]))
    return out


def build():
    areas = load_areas()
    specs = {}
    for area, c in areas.items():
        for key, spec in c.get("operations", {}).items():
            specs[key] = (area, spec)
    paths, tags = {}, {}
    for method, pattern, auth, role, src in routes():
        area = src[:-2]
        key = "%s %s" % (method.upper(), pattern)
        found = specs.pop(key, None)
        if found is not None and found[0] != area:
            raise ContractError("%s is in routes/schemas/%s.json, its route in routes/%s"
                                % (key, found[0], src))
        if found is not None:
            op = described_op(found[1], method, pattern, auth, role)
        else:
            op = legacy_op(method, pattern, auth)
        if role in ROLE_NAMES:
            who = "Minimum role: %s." % ROLE_NAMES[role]
            op["description"] = (op["description"] + "\n\n" + who) if "description" in op else who
        op = {"operationId": op.pop("operationId", None) or "%s_%s" % (
                  method, re.sub(r"[^A-Za-z0-9]+", "_", pattern).strip("_")),
              "tags": [area], **op}
        if "security" in op:
            pass  # the contract's own (e.g. /metrics' bearer token)
        elif auth in ("AUTH_SESSION", "AUTH_ORG"):
            op["security"] = [{"sessionCookie": []}]
        elif auth == "AUTH_OPTIONAL":
            op["security"] = [{"sessionCookie": []}, {}]
        else:
            op["security"] = []
        paths.setdefault(oa_path(pattern), {})[method] = op
        tags[area] = areas.get(area, {}).get("tag", "routes/%s" % src)
    if specs:
        raise ContractError("operations without a route: %s" % ", ".join(sorted(specs)))
    schemas = {"Error": ERROR, "User": USER, "Session": SESSION, "AuthResult": AUTH_RESULT,
               "SessionOrNull": SESSION_OR_NULL, "StreamEvent": STREAM_EVENT}
    schemas.update(components(areas))
    schemas = used(schemas, paths)
    return {
        "openapi": "3.1.0",
        "info": {"title": "coachd API", "version": "1",
                 "description": "Organization-based coaching backend: accounts and cookie "
                                "sessions, organizations and members, invites, mentorships, "
                                "video sessions, files, chat and event streams. docs/api.md is "
                                "the guide; this document is the contract of every body. Errors "
                                "share one shape (components/schemas/Error). Besides the "
                                "statuses each operation lists, any request may get 408 (head "
                                "or body too slow), 417 (an Expect other than 100-continue) or "
                                "431 (request head too large)."},
        "servers": [{"url": "/"}],
        "security": [{"sessionCookie": []}],
        "tags": [{"name": t, "description": d} for t, d in sorted(tags.items())],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "responses": {"Error": {"description": "Error",
                                    "content": {"application/json": {"schema": ERROR_REF}}}},
            "securitySchemes": {
                "sessionCookie": {"type": "apiKey", "in": "cookie", "name": "auth.session_token"},
                "metricsToken": {"type": "http", "scheme": "bearer"}},
        },
    }


def free_form(schema, comps, seen=()):
    """True when a schema accepts any JSON (no type, ref, composition, const or enum)."""
    if not isinstance(schema, dict):
        return True
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return name not in seen and free_form(comps.get(name), comps, seen + (name,))
    return not any(k in schema for k in ("type", "oneOf", "anyOf", "allOf", "const", "enum"))


def stats(doc):
    comps = doc["components"]["schemas"]
    ops = bodies = answers = 0
    loose = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            ops += 1
            where = "%s %s" % (method.upper(), path)
            for mt, m in op.get("requestBody", {}).get("content", {}).items():
                bodies += 1
                if free_form(m.get("schema"), comps):
                    loose.append("%s request %s" % (where, mt))
            for status, r in op["responses"].items():
                if not status.startswith("2") and not status.startswith("3"):
                    continue
                answers += 1
                for mt, m in r.get("content", {}).items():
                    if free_form(m.get("schema"), comps):
                        loose.append("%s %s %s" % (where, status, mt))
    print("%d operations, %d request bodies, %d success answers; %d free-form schemas"
          % (ops, bodies, answers, len(loose)))
    for line in loose:
        print("  free-form: " + line)


def main():
    try:
        doc = build()
    except ContractError as e:
        print("gen_openapi: %s" % e, file=sys.stderr)
        return 1
    if "--stats" in sys.argv:
        stats(doc)
        return 0
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
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
