#!/usr/bin/env python3
"""Writes docs/openapi.json, the OpenAPI 3.1 document of coachd, from the route tables in
routes/*.c (every method and path, its authentication and minimum role) and the contract files
routes/schemas/<area>.json (one per route file: its operations' parameters, bodies, answers and
errors, and the component schemas it owns; routes/README.md, "The contract", has the format).

    scripts/gen_openapi.py           rewrite docs/openapi.json
    scripts/gen_openapi.py --check   exit 1 when docs/openapi.json is not what it would write
    scripts/gen_openapi.py --stats   how much of the document is described (and what is not)
    scripts/gen_openapi.py --format  rewrite routes/schemas/*.json in their one layout (2-space
                                     JSON, keys in the order written); the tests refuse others

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


# Route files whose rows are not part of the API, left out of the document on purpose (every
# other route needs its contract entry): dev_pages.c serves HTML pages for a browser, only in
# development without FRONTEND_URL (404 in production), at paths outside /api. The document
# describes what a client may rely on wherever coachd runs; a page that production never serves
# is not part of it, and would show in the reference and the typed client as if it were.
NOT_API = {"dev_pages.c"}


def routes():
    """[(method, pattern, auth, role, file)] of every route table row (but NOT_API's)."""
    out = []
    for f in sorted(glob.glob(os.path.join(ROOT, "routes", "*.c"))):
        rows = list(ROW.finditer(open(f, encoding="utf-8").read()))
        if os.path.basename(f) in NOT_API:
            api = [m.group(2) for m in rows if m.group(2).startswith("/api/")]
            if api:  # the exclusion never hides an API route
                raise ContractError("routes/%s is NOT_API but serves %s"
                                    % (os.path.basename(f), ", ".join(api)))
            continue
        for m in rows:
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

SCHEMA_DIR = os.path.join(ROOT, "routes", "schemas")
ERROR_REF = {"$ref": "#/components/schemas/Error"}
UUID = {"type": "string", "format": "uuid"}


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
    out = {"Error": ERROR}  # built from docs/api.md's table of codes, never by an area
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
    session = auth in ("AUTH_SESSION", "AUTH_ORG")
    if session and "X-Organization-Id" not in spec.get("headers", {}):
        # The guard reads it on every session route (malformed: 400; an organization the
        # caller is not in: 403; none by that id: 404), and organization routes act in it.
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
    if params or "request" in spec or session:
        auto.append(("400", "A malformed parameter, header or body field (`details` names each "
                            "one)" + ("; ORG_CONTEXT_REQUIRED without organization context"
                                      if auth == "AUTH_ORG" else "")))
    if session:
        auto.append(("401", "No valid session"))
        auto.append(("403", "The caller may not do this (role, organization access), or "
                            "INVITE_GATE while invitations are pending"))
        auto.append(("404", "X-Organization-Id names no organization"))
    elif method in ("post", "put", "patch", "delete"):
        auto.append(("403", "A cross-site request: it carries a cookie and an Origin (or "
                            "Referer) that is not trusted"))
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


# The reference page's table of contents: areas in the order a client meets them.
TAG_GROUPS = [
    ("Accounts", ["auth", "user_sessions", "two_factor", "account", "recovery", "me", "users",
                  "push_tokens"]),
    ("Organizations", ["organizations", "invites"]),
    ("Mentoring", ["mentorships", "sessions", "calendar", "chat", "events"]),
    ("Files", ["files", "files_upload", "files_local"]),
    ("Operations", ["health", "setup", "metrics", "openapi", "docs"]),
]


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
        if found is None:
            raise ContractError("%s (routes/%s) has no entry in routes/schemas/%s.json"
                                % (key, src, area))
        op = described_op(found[1], method, pattern, auth, role)
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
        tags[area] = {"name": area, "x-displayName": areas[area].get("title", area),
                      "description": areas[area]["tag"]}
    if specs:
        raise ContractError("operations without a route: %s" % ", ".join(sorted(specs)))
    grouped = [t for _, names in TAG_GROUPS for t in names]
    if sorted(grouped) != sorted(tags):
        raise ContractError("TAG_GROUPS and the areas differ: %s"
                            % sorted(set(grouped) ^ set(tags)))
    schemas = components(areas)
    schemas = used(schemas, paths)
    shared = {"securitySchemes": {
        "sessionCookie": {"type": "apiKey", "in": "cookie", "name": "auth.session_token"},
        "metricsToken": {"type": "http", "scheme": "bearer"}}}
    if "#/components/responses/Error" in json.dumps(paths):
        shared["responses"] = {"Error": {"description": "Error", "content": {
            "application/json": {"schema": ERROR_REF}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "coachd API", "version": "1",
                 "description": "Organization-based coaching backend: accounts and cookie "
                                "sessions, organizations and members, invites, mentorships, "
                                "video sessions, files, chat and event streams. docs/api.md is "
                                "the guide; this document is the contract of every body. Errors "
                                "share one shape (components/schemas/Error). Besides the "
                                "statuses each operation lists, any request may get 400 (a "
                                "malformed request line, target or chunked body), 408 (head "
                                "or body too slow), 417 (an Expect other than 100-continue) or "
                                "431 (request head too large)."},
        "servers": [{"url": "/"}],
        "security": [{"sessionCookie": []}],
        "tags": [tags[t] for t in grouped],
        "x-tagGroups": [{"name": g, "tags": names} for g, names in TAG_GROUPS],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(schemas.items())),
            **shared,
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


def canonical(contract):
    return json.dumps(contract, indent=2, ensure_ascii=False) + "\n"


def format_contracts():
    for f in sorted(glob.glob(os.path.join(SCHEMA_DIR, "*.json"))):
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        want = canonical(json.loads(text))
        if want != text:
            with open(f, "w", encoding="utf-8") as fh:
                fh.write(want)
            print("formatted %s" % os.path.relpath(f, ROOT))


def main():
    if "--format" in sys.argv:
        format_contracts()
        return 0
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
