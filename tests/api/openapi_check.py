"""Validates every API exchange against docs/openapi.json (JSON Schema 2020-12,
python3-jsonschema), so the document and the server cannot drift. helpers.Client calls check() on
every response.

For an operation described by a contract file (routes/schemas/<area>.json):
- the status must be one the operation documents (408, 417 and 431, the connection's statuses,
  excepted), and the media type one it documents for that status (no body where it documents
  none);
- a JSON answer must match its schema, formats (date-time, uuid, email) included;
- a request answered 2xx must match the request schema with unknown properties refused, and send
  only documented query parameters: a test cannot rely on an undocumented field. A test that sends
  an unknown field on purpose (to show it is ignored) passes `openapi_loose=True` to the Client call.
Every JSON error answer (4xx/5xx) must match the error shape (components/schemas/Error).

Each first answer per (operation, status) is kept in RECORDED for the mutation test
(test_openapi_mutations.py), which shows that these schemas catch a dropped or an added field."""
import copy
import glob
import json
import os
import re
from urllib.parse import parse_qsl, urlsplit

import jsonschema

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = json.load(open(os.path.join(ROOT, "docs", "openapi.json"), encoding="utf-8"))
TRANSPORT_STATUSES = {"408", "417", "431"}


def _described():
    """(METHOD, template) of every operation a contract file describes."""
    out = set()
    for f in glob.glob(os.path.join(ROOT, "routes", "schemas", "*.json")):
        for key in json.load(open(f, encoding="utf-8")).get("operations", {}):
            method, pattern = key.split(" ", 1)
            out.add((method, re.sub(r":(\w+)", r"{\1}", pattern)))
    return out


DESCRIBED = _described()
OPS = []  # (method, compiled path regex, template, operation)
for template, item in DOC["paths"].items():
    rx = re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template)) + "$")
    for method, op in item.items():
        OPS.append((method.upper(), rx, template, op))
# Literal segments before parameters: /api/files/presign wins over /api/files/{fileId}.
OPS.sort(key=lambda o: o[2].count("{"))
UNDOCUMENTED = set()
CHECKED = {"responses": 0, "operations": set(), "requests": 0}
RECORDED = {}  # (METHOD, template, status) -> JSON body of the first such answer

# Formats checked by hand: Debian's python3-jsonschema checks date-time only with a module it
# does not depend on, and a check that silently passes is no check.
FORMATS = jsonschema.FormatChecker(formats=())
DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
UUID_RX = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                     r"[0-9a-fA-F]{12}$")
EMAIL_RX = re.compile(r"^[^@\s]+@[^@\s]+$")
DATE_RX = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _fmt(name, rx):
    @FORMATS.checks(name)
    def check(value):
        return not isinstance(value, str) or bool(rx.match(value))
    return check


_fmt("date-time", DATE_TIME)
_fmt("uuid", UUID_RX)
_fmt("email", EMAIL_RX)
_fmt("date", DATE_RX)


def find(method, path):
    for m, rx, template, op in OPS:
        if m == method and rx.match(path):
            return template, op
    return None, None


def closed(schema):
    """A copy of a request schema whose objects refuse unknown properties."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


STRICT_COMPONENTS = closed(DOC["components"])
_CLOSED = {}  # id(request schema of DOC) -> its closed copy


_VALIDATORS = {}


def _validator(schema, components):
    """One validator per schema object of the document (they live as long as DOC)."""
    key = (id(schema), id(components))
    v = _VALIDATORS.get(key)
    if v is None:
        root = dict(schema)
        root["components"] = components or DOC["components"]
        v = _VALIDATORS[key] = (jsonschema.Draft202012Validator(root, format_checker=FORMATS),
                                schema)
    return v[0]


def validate(schema, body, what, components=None):
    """Raises AssertionError when body does not match schema (refs into the document's
    components, or `components`)."""
    errors = list(_validator(schema, components).iter_errors(body))
    if errors:
        e = min(errors, key=lambda e: len(e.absolute_path))
        where = "/".join(str(p) for p in e.absolute_path)
        raise AssertionError("does not match docs/openapi.json (%s) at /%s: %s" %
                             (what, where, e.message))


def is_valid(schema, body):
    try:
        validate(schema, body, "")
    except AssertionError:
        return False
    return True


def _media_type(ctype):
    return ctype.split(";")[0].strip().lower()


def _check_request(method, template, op, response):
    """A 2xx answer: what the test sent must be documented (query names, JSON body)."""
    req = response.request
    what = "request of %s %s" % (method, template)
    documented = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
    for name, _ in parse_qsl(urlsplit(req.url).query, keep_blank_values=True):
        assert name in documented, "%s: query parameter %r is not documented" % (what, name)
    rb = op.get("requestBody")
    body = req.body
    if rb is None or "application/json" not in rb["content"]:
        return
    if not body:
        assert not rb.get("required"), "%s: the documented body is required" % what
        return
    if not _media_type(req.headers.get("Content-Type", "")).endswith("json"):
        return
    try:
        sent = json.loads(body)
    except ValueError:
        return
    CHECKED["requests"] += 1
    schema = rb["content"]["application/json"]["schema"]
    strict = _CLOSED.get(id(schema))
    if strict is None:
        strict = _CLOSED[id(schema)] = closed(schema)
    validate(strict, sent, what, STRICT_COMPONENTS)


def check(method, url, response, loose=False):
    method = method.upper()
    ctype = response.headers.get("Content-Type", "")
    streamed = response.raw is not None and getattr(response, "_content_consumed", True) is False
    path = urlsplit(url).path
    template, op = find(method, path)
    status = str(response.status_code)
    is_json = _media_type(ctype) == "application/json"
    body = None
    if is_json and not streamed:
        try:
            body = response.json()
        except ValueError:
            raise AssertionError("%s %s: invalid JSON body" % (method, path)) from None
    resp = op["responses"].get(status) if op else None
    if is_json and not streamed and response.status_code >= 400:
        validate({"$ref": "#/components/schemas/Error"}, body, "%s %s %s" % (method, path, status))
    if op is None:
        return
    CHECKED["responses"] += 1
    CHECKED["operations"].add((method, template))
    strict = (method, template) in DESCRIBED
    if resp is None:
        if strict and status not in TRANSPORT_STATUSES:
            raise AssertionError("%s %s answered %s, a status docs/openapi.json does not "
                                 "document for it" % (method, template, status))
        UNDOCUMENTED.add((method, template, status))
        return
    if "$ref" in resp:
        return  # the error shape, checked above
    content = resp.get("content")
    if strict and method != "HEAD":
        if content is None:
            assert streamed or not response.content, \
                "%s %s %s: a body where docs/openapi.json documents none" % (method, template,
                                                                            status)
        else:
            mt = _media_type(ctype)
            assert mt in content or "*/*" in content, \
                "%s %s %s: media type %r is not documented (%s)" % (
                    method, template, status, mt, ", ".join(content))
    if streamed:
        return
    schema = (content or {}).get("application/json", {}).get("schema")
    if schema is not None and is_json:
        validate(schema, body, "%s %s %s" % (method, template, status))
        RECORDED.setdefault((method, template, status), body)
    if strict and response.status_code < 300 and not loose:
        _check_request(method, template, op, response)
