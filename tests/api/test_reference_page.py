"""GET /api/docs, the API reference: the page and its headers (a strict Content-Security-Policy,
no inline script), the renderer's bundle (content-hashed name, immutable caching, ETag and 304,
gzip), and the page as a browser shows it: headless Chromium (reference_page.js) renders every
tag of docs/openapi.json in the navigation, with no console error (a CSP violation is one), no
request leaving the origin, and a screenshot saved under the test run's logs
(COACHD_TEST_ARTIFACTS, which scripts/test sets to .local/test-logs/artifacts)."""
import hashlib
import importlib.util
import json
import os
import re
import subprocess
from urllib.parse import urlsplit

import pytest

from helpers import BASE_URL, ROOT, Client, artifacts_dir, parse_csp

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLE_SRC = os.path.join(ROOT, "docs", "reference", "node_modules", "redoc", "bundles",
                          "redoc.standalone.js")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# What routes/docs.c promises; every directive is checked, so a loosened one fails.
CSP = {
    "default-src": ["'none'"],
    "script-src": ["'self'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "worker-src": ["blob:"],
    "base-uri": ["'none'"],
    "form-action": ["'none'"],
    "frame-ancestors": ["'none'"],
}


def document_tags():
    """Every tag of docs/openapi.json as the reference should show it: the top-level list and
    every operation's, in the document's order, with the x-displayName Redoc shows if any."""
    doc = json.load(open(os.path.join(ROOT, "docs", "openapi.json"), encoding="utf-8"))
    shown = {}
    for t in doc.get("tags", []):
        shown[t["name"]] = t.get("x-displayName", t["name"])
    for item in doc["paths"].values():
        for op in item.values():
            for name in op.get("tags", []):
                shown.setdefault(name, name)
    return shown


def missing_tags(tags, seen):
    """The tags (name -> label) that the rendered navigation (seen: its labels) lacks."""
    return sorted(name for name, label in tags.items() if label not in seen)


def page_script(html):
    m = re.search(r'<script src="(/api/docs/redoc\.([0-9a-f]{16})\.js)"></script>', html)
    assert m, html
    return m.group(1), m.group(2)


def test_page_is_served_with_a_strict_csp_and_no_inline_script():
    r = Client().get("/api/docs")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert parse_csp(r.headers["Content-Security-Policy"]) == CSP
    assert r.headers["Referrer-Policy"] == "no-referrer"
    assert r.headers["Cache-Control"] == "no-store"
    html = r.text
    assert '<redoc spec-url="/api/openapi.json"></redoc>' in html
    # Every script comes from a file of this origin: none has a body, none an event handler.
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert len(scripts) == 1 and scripts[0][1] == "", scripts
    assert not re.search(r"\son\w+=", html)
    assert "not built in" not in html and "no reference renderer" not in html, \
        "the binary was built without the bundle: run `npm ci` in docs/reference (scripts/test does)"


def served_bundle():
    """The installed bundle as routes/embed_bundle.py prepares it for the binary."""
    spec = importlib.util.spec_from_file_location(
        "embed_bundle", os.path.join(ROOT, "routes", "embed_bundle.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.prepare(open(BUNDLE_SRC, "rb").read())


def test_bundle_is_the_installed_one_cached_by_its_hash():
    src = served_bundle()
    digest = hashlib.sha256(src).hexdigest()[:16]
    path, name_hash = page_script(Client().get("/api/docs").text)
    assert name_hash == digest

    c = Client()
    r = c.get(path)  # requests accepts gzip: the stored gzipped copy is sent
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/javascript; charset=utf-8"
    assert r.headers["Content-Encoding"] == "gzip"
    assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert r.headers["ETag"] == '"%s-gzip"' % digest  # its own tag: another representation
    assert r.headers["Vary"] == "Accept-Encoding"
    assert r.content == src  # decoded by requests
    assert int(r.headers["Content-Length"]) < len(src) // 2

    plain = c.get(path, headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    assert plain.content == src and plain.headers["ETag"] == '"%s"' % digest
    # A tag stands for its own representation only: the gzipped copy's tag does not make the
    # plain bytes current, nor the other way round; and tags compare byte for byte.
    assert c.get(path, headers={"Accept-Encoding": "identity",
                                "If-None-Match": r.headers["ETag"]}).status_code == 200
    assert c.get(path, headers={"If-None-Match": plain.headers["ETag"]}).status_code == 200
    assert c.get(path, headers={"Accept-Encoding": "identity",
                                "If-None-Match": '"%s"' % digest.upper()}).status_code == 200
    refused = c.get(path, headers={"Accept-Encoding": "gzip;q=0, identity"})
    assert "Content-Encoding" not in refused.headers and refused.content == src

    again = c.get(path, headers={"If-None-Match": r.headers["ETag"]})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["ETag"] == r.headers["ETag"]
    assert again.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    other = c.get(path, headers={"If-None-Match": '"0000000000000000"'})
    assert other.status_code == 200

    head = c.head(path, headers={"Accept-Encoding": "identity"})
    assert head.status_code == 200 and int(head.headers["Content-Length"]) == len(src)


def test_bundle_revalidation_compares_entity_tags_weakly():
    """If-None-Match compares weakly (RFC 9110 13.1.2): W/"<hash>", as a proxy that weakens the
    tag sends it back, alone or in a list, is the same tag and gets 304, not the bundle again."""
    path, digest = page_script(Client().get("/api/docs").text)
    c = Client()
    for inm in ('W/"%s"' % digest, '"0000000000000000", W/"%s"' % digest, "*"):
        r = c.get(path, headers={"If-None-Match": inm, "Accept-Encoding": "identity"})
        assert r.status_code == 304 and r.content == b"", inm
    for inm in ('W/"0000000000000000"', 'W/%s' % digest, '"W/%s"' % digest):
        assert c.get(path, headers={"If-None-Match": inm,
                                    "Accept-Encoding": "identity"}).status_code == 200, inm
    # The gzipped copy, under its own tag, weakened by a proxy too.
    r = c.get(path, headers={"If-None-Match": 'W/"%s-gzip"' % digest})
    assert r.status_code == 304 and r.content == b""


@pytest.mark.parametrize("name", ["redoc.0123456789abcdef.js", "redoc.standalone.js", "x"])
def test_other_bundle_names_are_not_found(name):
    r = Client().get("/api/docs/" + name)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "NOT_FOUND"


@pytest.fixture(scope="module")
def rendered():
    """The page as headless Chromium rendered it (reference_page.js's report)."""
    assert os.path.isfile(CHROMIUM), "Chromium is missing (scripts/lib/deps.sh installs it)"
    assert os.path.isdir(os.path.join(HERE, "node_modules", "playwright-core")), \
        "run `npm ci` in tests/api first (scripts/test does)"
    shot = os.path.join(artifacts_dir(), "reference-page.png")
    if os.path.exists(shot):
        os.remove(shot)
    out = subprocess.run(["node", os.path.join(HERE, "reference_page.js"), BASE_URL + "/api/docs",
                          shot], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_browser_renders_every_tag_without_errors_or_outside_requests(rendered, capsys):
    r = rendered
    assert r["status"] == 200
    assert parse_csp(r["headers"]["content-security-policy"]) == CSP
    tags = document_tags()
    assert len(tags) > 10
    assert missing_tags(tags, r["menuLabels"]) == [], r["menuLabels"]
    assert r["consoleErrors"] == [] and r["pageErrors"] == [], r
    assert r["violations"] == [], r["violations"]
    assert r["failedRequests"] == [], r["failedRequests"]
    origin = urlsplit(BASE_URL)
    outside = [u for u in r["requests"]
               if urlsplit(u).scheme not in ("data", "blob")
               and (urlsplit(u).scheme, urlsplit(u).netloc) != (origin.scheme, origin.netloc)]
    assert outside == [], outside
    # The page fetched the renderer and the document from this server.
    paths = {urlsplit(u).path for u in r["requests"]}
    assert "/api/openapi.json" in paths and any(p.startswith("/api/docs/redoc.") for p in paths)
    assert os.path.getsize(r["screenshot"]) > 10000
    with open(r["screenshot"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with capsys.disabled():
        print("\nreference page screenshot: %s (%d tags rendered)" % (r["screenshot"], len(tags)))


def test_tag_check_fails_for_a_tag_the_page_does_not_show(rendered):
    """The check above can fail: a tag the document had but the page did not render is named."""
    tags = dict(document_tags(), **{"no-such-tag": "no-such-tag"})
    assert missing_tags(tags, rendered["menuLabels"]) == ["no-such-tag"]
