"""Validates API responses against docs/openapi.json (JSON Schema 2020-12, python3-jsonschema),
so the document and the server cannot drift. helpers.Client calls check() on every response.

- A response to a documented operation with a documented status and a JSON schema must match it.
- Every JSON error answer (4xx/5xx) must match the error shape (components/schemas/Error),
  unless the operation documents that status with a schema of its own (the health probes).
- A status the operation does not document is recorded in UNDOCUMENTED (reported, not failed:
  the document lists the usual statuses per kind of route, not each handler's own)."""
import json
import os
import re
from urllib.parse import urlsplit

import jsonschema

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = json.load(open(os.path.join(ROOT, "docs", "openapi.json"), encoding="utf-8"))
OPS = []  # (method, compiled path regex, template, operation)
for template, item in DOC["paths"].items():
    rx = re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template)) + "$")
    for method, op in item.items():
        OPS.append((method.upper(), rx, template, op))
# Literal segments before parameters: /api/files/presign wins over /api/files/{fileId}.
OPS.sort(key=lambda o: o[2].count("{"))
UNDOCUMENTED = set()
CHECKED = {"responses": 0, "operations": set()}


def find(method, path):
    for m, rx, template, op in OPS:
        if m == method and rx.match(path):
            return template, op
    return None, None


def _validate(schema, body, what):
    root = dict(schema)
    root["components"] = DOC["components"]
    try:
        jsonschema.validate(body, root, cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError as e:
        raise AssertionError("response does not match docs/openapi.json (%s): %s" %
                             (what, e.message)) from None


def check(method, url, response):
    ctype = response.headers.get("Content-Type", "")
    if response.raw is not None and getattr(response, "_content_consumed", True) is False:
        return  # streamed bodies (SSE) are read by the test itself
    path = urlsplit(url).path
    template, op = find(method.upper(), path)
    status = str(response.status_code)
    is_json = ctype.startswith("application/json")
    body = None
    if is_json:
        try:
            body = response.json()
        except ValueError:
            raise AssertionError("%s %s: invalid JSON body" % (method, path)) from None
    resp = op["responses"].get(status) if op else None
    own = resp is not None and "$ref" not in resp  # e.g. /api/health/ready's 503
    if is_json and response.status_code >= 400 and not own:
        _validate({"$ref": "#/components/schemas/Error"}, body, "%s %s %s" % (method, path, status))
    if op is None:
        return
    CHECKED["responses"] += 1
    CHECKED["operations"].add((method.upper(), template))
    resp = op["responses"].get(status)
    if resp is None:
        UNDOCUMENTED.add((method.upper(), template, status))
        return
    if "$ref" in resp:
        return  # the error shape, checked above
    schema = resp.get("content", {}).get("application/json", {}).get("schema")
    if schema is not None and is_json:
        _validate(schema, body, "%s %s %s" % (method, template, status))
