"""The OpenAPI document: served as built, current with the route tables, valid JSON Schema, and
the responses of a sample of operations match it (every Client response is checked too:
openapi_check.py)."""
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


def test_main_responses_validate():
    c, user = sign_up()
    for path in ("/api/auth/session", "/api/auth/get-session", "/api/users/me"):
        assert c.get(path).status_code == 200
    assert Client().get("/api/auth/get-session").json() is None
    assert openapi_check.CHECKED["responses"] > 0


def test_redocly_lint_passes():
    """`redocly lint` (@redocly/cli, pinned in package.json) with its recommended rules
    (redocly.yaml; the one problem ignored on purpose is in .redocly.lint-ignore.yaml): exit 0,
    no error and no warning (its JSON report; banners about Node.js go to stderr)."""
    here = os.path.dirname(os.path.abspath(__file__))
    assert os.path.isdir(os.path.join(here, "node_modules", "@redocly", "cli")), \
        "run `npm ci` in tests/api first (scripts/test does)"
    env = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true")
    out = subprocess.run(["npx", "--no-install", "redocly", "lint", "../../docs/openapi.json",
                          "--format=json"],
                         cwd=here, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["totals"]["errors"] == 0 and report["totals"]["warnings"] == 0, report
    assert report["problems"] == [], report
