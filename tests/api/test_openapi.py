"""The OpenAPI document: served as built, current with the route tables and routes/schemas,
complete (no schema that accepts anything), valid JSON Schema, clean under redocly's stricter
rules, and the checks of openapi_check.py (run on every exchange of the suite) can fail."""
import json
import os
import subprocess
import sys

import jsonschema
import pytest

import openapi_check
from helpers import ROOT, Client, sign_up


def test_served_document_is_the_repository_one():
    r = Client().get("/api/openapi.json")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json() == json.load(open(os.path.join(ROOT, "docs", "openapi.json")))
    assert r.json()["openapi"] == "3.1.0"


def test_document_is_current_with_the_route_tables():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_openapi.py"),
                          "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def load_generator():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "gen_openapi", os.path.join(ROOT, "scripts", "gen_openapi.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def test_generator_refuses_a_route_without_contract_and_a_contract_without_route():
    gen = load_generator()
    areas = gen.load_areas()

    def build_with(change):
        changed = json.loads(json.dumps(areas))
        change(changed)
        gen.load_areas = lambda: changed
        return gen.build

    gen.build()  # as committed
    with pytest.raises(gen.ContractError, match="has no entry"):
        build_with(lambda a: a["users"]["operations"].pop("GET /api/users/:id"))()
    with pytest.raises(gen.ContractError, match="without a route"):
        build_with(lambda a: a["users"]["operations"].__setitem__(
            "GET /api/users/:id/nothing", a["users"]["operations"]["GET /api/users/:id"]))()
    with pytest.raises(gen.ContractError, match="undefined component"):
        build_with(lambda a: a["users"]["operations"]["GET /api/users/:id"]["responses"][
            "200"].__setitem__("schema", {"$ref": "#/components/schemas/Nothing"}))()


def test_contract_files_are_in_their_one_layout():
    """routes/schemas/*.json as `scripts/gen_openapi.py --format` writes them, with only the
    members the generator reads (a misspelt member would be ignored silently)."""
    gen = load_generator()
    known_ops = {"summary", "description", "operationId", "path", "query", "headers", "request",
                 "responses", "errors", "security"}
    for f in sorted(n for n in os.listdir(gen.SCHEMA_DIR) if n.endswith(".json")):
        text = open(os.path.join(gen.SCHEMA_DIR, f), encoding="utf-8").read()
        contract = json.loads(text)
        assert text == gen.canonical(contract), "%s: run scripts/gen_openapi.py --format" % f
        assert set(contract) <= {"title", "tag", "schemas", "operations"}, (f, sorted(contract))
        for key, op in contract.get("operations", {}).items():
            assert set(op) <= known_ops, (f, key, sorted(set(op) - known_ops))
            for status, r in op["responses"].items():
                assert set(r) <= {"description", "schema", "content", "headers"}, (f, key, status)


def test_no_schema_accepts_anything():
    """Every request body and success answer says what it holds (SSE streams and file bytes by
    media type); --stats lists those that do not, and the list must be empty."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_openapi.py"),
                          "--stats"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].endswith("; 0 free-form schemas"), out.stdout
    gen = load_generator()
    assert gen.free_form({}, {}) and gen.free_form({"description": "x"}, {})
    assert not gen.free_form({"type": "object"}, {})


def test_every_schema_is_valid_2020_12():
    doc = openapi_check.DOC
    n = 0
    for item in doc["paths"].values():
        for op in item.values():
            for resp in op["responses"].values():
                for media in resp.get("content", {}).values():
                    jsonschema.Draft202012Validator.check_schema(media["schema"])
                    n += 1
    for schema in doc["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    assert n > 78


def test_validation_catches_a_drift():
    class Fake:
        status_code = 200
        headers = {"Content-Type": "application/json"}
        raw = None

        def json(self):
            return {"user": {"id": 1}}

    with pytest.raises(AssertionError, match="does not match"):
        openapi_check.check("POST", "http://x/api/auth/sign-in/email", Fake())
    Fake.status_code = 400
    with pytest.raises(AssertionError, match="does not match"):
        openapi_check.check("GET", "http://x/api/users/me", Fake())
    # A success status the operation does not document.
    Fake.status_code = 201
    with pytest.raises(AssertionError, match="does not document"):
        openapi_check.check("GET", "http://x/api/users/me", Fake())


def test_main_responses_validate():
    c, user = sign_up()
    for path in ("/api/auth/session", "/api/auth/get-session", "/api/users/me"):
        assert c.get(path).status_code == 200
    assert Client().get("/api/auth/get-session").json() is None
    assert openapi_check.CHECKED["responses"] > 0


def redocly_lint(path, here):
    env = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true")
    out = subprocess.run(["npx", "--no-install", "redocly", "lint", path, "--format=json"],
                         cwd=here, env=env, capture_output=True, text=True, timeout=120)
    return out.returncode, json.loads(out.stdout) if out.stdout.strip() else out.stderr


def test_redocly_lint_passes(tmp_path):
    """`redocly lint` (@redocly/cli, pinned in package.json) with the rules of redocly.yaml
    (recommended, operation ids, 4xx answers, and no media type without a schema nor an empty
    schema; the one problem ignored on purpose is in .redocly.lint-ignore.yaml): exit 0, no error
    and no warning (its JSON report; banners about Node.js go to stderr). A copy of the document
    with one answer's schema emptied fails it."""
    here = os.path.dirname(os.path.abspath(__file__))
    assert os.path.isdir(os.path.join(here, "node_modules", "@redocly", "cli")), \
        "run `npm ci` in tests/api first (scripts/test does)"
    rc, report = redocly_lint("../../docs/openapi.json", here)
    assert rc == 0, report
    assert report["totals"]["errors"] == 0 and report["totals"]["warnings"] == 0, report
    assert report["problems"] == [], report

    doc = json.load(open(os.path.join(ROOT, "docs", "openapi.json")))
    doc["paths"]["/api/users/me"]["get"]["responses"]["200"]["content"]["application/json"][
        "schema"] = {}
    broken = tmp_path / "openapi.json"
    broken.write_text(json.dumps(doc))
    rc, report = redocly_lint(str(broken), here)
    emptied = [p for p in report["problems"] if p["ruleId"] == "rule/schema-not-empty"]
    assert rc != 0 and len(emptied) == 1, report
    assert emptied[0]["location"][0]["pointer"].startswith("#/paths/~1api~1users~1me/get/"), \
        emptied
