"""The typed client (issue "a typed client, used"): TypeScript types generated from
docs/openapi.json by openapi-typescript, an openapi-fetch client over them, type-checked by tsc
(strict), and a walk through it (sign-up -> organization -> invite -> mentorship -> session ->
chat -> file, ts/walk.mts) against this server. Every answer and every request body the walk
sends is validated against the same document at run time (ts/contract.mts), so drift between the
document and the server fails here: a field renamed or dropped in the document fails tsc, an
answer that does not match it fails the walk."""
import os
import subprocess
import time

from helpers import ROOT, loopback_ip
from orgs import make_platform_admin

HERE = os.path.dirname(os.path.abspath(__file__))
TS = os.path.join(HERE, "ts")
BIN = os.path.join(HERE, "node_modules", ".bin")
DOC = os.environ.get("COACHD_TYPED_CLIENT_DOC", os.path.join(ROOT, "docs", "openapi.json"))


def run(cmd, what, timeout=180, **kw):
    t = time.monotonic()
    r = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True, timeout=timeout, **kw)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0, "%s failed (exit %d):\n%s" % (what, r.returncode, out[-8000:])
    print("%s: %.1f s" % (what, time.monotonic() - t))
    return out


def test_typed_client_walk():
    # The types are always those of the current document: generated on every run, never kept.
    os.makedirs(os.path.join(TS, "generated"), exist_ok=True)
    run([os.path.join(BIN, "openapi-typescript"), DOC, "-o",
         os.path.join(TS, "generated", "openapi.d.ts")], "openapi-typescript")
    # tsc checks the walk against them (strict) and emits it only when it type-checks.
    run([os.path.join(BIN, "tsc"), "-p", os.path.join(TS, "tsconfig.json")], "tsc")

    # POST /api/organizations needs a PlatformAdmin, which only first-run (once per database)
    # or SQL can make; the walk starts from its session.
    admin, _ = make_platform_admin()
    env = dict(os.environ, COACHD_OPENAPI=DOC, COACHD_ADMIN_TOKEN=admin.session_token,
               COACHD_SOURCE_IP=loopback_ip())
    out = run(["node", os.path.join(TS, "out", "walk.mjs")], "walk", env=env)
    print(out)
    assert "walk done" in out, out
