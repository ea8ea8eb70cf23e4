"""The typed client (issue "a typed client, used"): TypeScript types generated from
docs/openapi.json by openapi-typescript, an openapi-fetch client over them, type-checked by tsc
(strict), and a walk through it (sign-up -> organization -> invite -> mentorship -> session ->
chat -> file, ts/walk.mts) against this server. Every answer and every request body the walk
sends is validated against the same document at run time (ts/contract.mts), so drift between the
document and the server fails here: a field renamed or dropped in the document fails tsc, an
answer that does not match it fails the walk."""
import copy
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from helpers import ROOT, loopback_ip
from orgs import make_platform_admin

HERE = os.path.dirname(os.path.abspath(__file__))
TS = os.path.join(HERE, "ts")
BIN = os.path.join(HERE, "node_modules", ".bin")
DOC = os.path.join(ROOT, "docs", "openapi.json")


def run(cmd, what, timeout=180, env=None):
    """Runs cmd in tests/api; returns (exit status, stdout + stderr)."""
    t = time.monotonic()
    r = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True, timeout=timeout, env=env)
    print("%s: exit %d in %.1f s" % (what, r.returncode, time.monotonic() - t))
    return r.returncode, (r.stdout + r.stderr).strip()


def must(result, what):
    rc, out = result
    assert rc == 0, "%s failed (exit %d):\n%s" % (what, rc, out[-8000:])
    return out


@pytest.fixture(scope="module")
def walk_js():
    """Generates the types from the current document (never kept: ts/generated is ignored) and
    compiles the walk with tsc, which emits nothing when it does not type-check."""
    shutil.rmtree(os.path.join(TS, "out"), ignore_errors=True)  # never a walk of an older run
    os.makedirs(os.path.join(TS, "generated"), exist_ok=True)
    must(run([os.path.join(BIN, "openapi-typescript"), DOC, "-o",
              os.path.join(TS, "generated", "openapi.d.ts")], "openapi-typescript"),
         "openapi-typescript")
    must(run([os.path.join(BIN, "tsc"), "-p", os.path.join(TS, "tsconfig.json")], "tsc"), "tsc")
    return os.path.join(TS, "out", "walk.mjs")


def walk(walk_js, doc):
    # POST /api/organizations needs a PlatformAdmin, which only first-run (once per database)
    # or SQL can make: the walk starts from the session of one made here.
    admin, _ = make_platform_admin()
    env = dict(os.environ, COACHD_OPENAPI=doc, COACHD_ADMIN_TOKEN=admin.session_token,
               COACHD_SOURCE_IP=loopback_ip())
    return run(["node", walk_js], "walk", env=env)


def test_typed_client_has_no_escape_hatches():
    """tsc can only catch drift in what the walk reads through the generated types: no `any`
    and no suppressed errors in the client's sources. Every operation of the document is
    described, so nothing stands between an answer and its generated type either: no runtime
    shapes module and no `known(...)` reading an answer through one, no `undocumentedBody`
    sending a body past the typed client, and no type assertion in the walk."""
    pattern = re.compile(r"\bas any\b|:\s*any\b|<any>|@ts-(ignore|expect-error|nocheck)"
                         r"|\bknown\(|\bshapes\.m?[jt]s\b|\bundocumentedBody\b")
    # "x as T" in code (string literals and comments removed first: the walk's messages say
    # "as created"); `as const` loosens nothing.
    cast = re.compile(r"[\w)\]]\s+as\s+(?!const\b)[\w{(\[]")
    literal = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`(?:[^`\\]|\\.)*`|//.*')
    names = sorted(os.listdir(TS))
    assert not [n for n in names if n.startswith("shapes.")], "a shapes module: %s" % names
    for name in names:
        if name.endswith(".mts"):
            with open(os.path.join(TS, name)) as f:
                for n, line in enumerate(f, 1):
                    assert not pattern.search(line), "%s:%d: %s" % (name, n, line.strip())
                    if name == "walk.mts":
                        code = literal.sub('""', line)
                        assert not cast.search(code), "%s:%d: %s" % (name, n, line.strip())


def test_typed_client_walk(walk_js):
    out = must(walk(walk_js, DOC), "the walk")
    print(out)
    assert "walk done" in out, out


# ---- the run-time check bites ---------------------------------------------------------------


def follow(doc, node):
    """node, or what its $ref chain points at in doc."""
    while isinstance(node, dict) and "$ref" in node:
        target = doc
        for key in node["$ref"].lstrip("#").strip("/").split("/"):
            target = target[key.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def json_schema(doc, op, status=None):
    """The JSON schema of op's answer `status`, or of its request body (status None)."""
    part = op["requestBody"] if status is None else op["responses"][str(status)]
    return follow(doc, follow(doc, part)["content"]["application/json"]["schema"])


def answer_requires_more(doc):
    """presign's answer must carry a field the server does not send."""
    data = follow(doc, json_schema(doc, doc["paths"]["/api/files/presign"]["post"], 200)
                  ["properties"]["data"])
    data["properties"]["expiresAt"] = {"type": "string", "format": "date-time"}
    data["required"].append("expiresAt")
    return "must have required property 'expiresAt'"


def status_undocumented(doc):
    """Creating a mentorship answers 201, which the document no longer lists."""
    del doc["paths"]["/api/mentorships"]["post"]["responses"]["201"]
    return "POST /api/mentorships: answered 201, which the document does not list"


def request_field_unknown(doc):
    """sign-up's request no longer documents `name`, which the walk sends."""
    body = json_schema(doc, doc["paths"]["/api/auth/sign-up/email"]["post"])
    del body["properties"]["name"]
    body["required"].remove("name")
    return "the request body does not match the document"


def event_requires_more(doc):
    """A chat-message event must carry a field the server does not send."""
    stream = doc["paths"]["/api/events/mentorships/{mentorshipId}/events"]["get"]
    media = follow(doc, stream["responses"]["200"])["content"]["text/event-stream"]
    item = follow(doc, media.get("x-itemSchema") or media["schema"]["contentSchema"])
    for member in (follow(doc, m) for m in item["oneOf"]):
        event = member["properties"]["event"]
        if "chat-message" in event.get("enum", [event.get("const")]):
            # A copy: the event's data is the ChatMessage component, which the post's answer
            # uses too, and only the event is to drift.
            data = copy.deepcopy(follow(doc, member["properties"]["data"]))
            data.setdefault("properties", {})["notSent"] = {"type": "string"}
            data["required"] = data.get("required", []) + ["notSent"]
            member["properties"]["data"] = data
            return "an event that does not match the document"
    raise AssertionError("no chat-message event in the document")


@pytest.mark.parametrize("mutate", [answer_requires_more, status_undocumented,
                                    request_field_unknown, event_requires_more])
def test_typed_client_walk_fails_on_drift(walk_js, mutate, tmp_path):
    """The same walk, checked against a copy of the document that no longer matches the server
    in one way, must fail and say where."""
    with open(DOC) as f:
        doc = json.load(f)
    expected = mutate(doc)
    path = tmp_path / "openapi.json"
    path.write_text(json.dumps(doc))
    rc, out = walk(walk_js, str(path))
    assert rc != 0 and expected in out, out[-4000:]
