"""Every error code the C sources can answer is one of the codes docs/api.md lists ("Errors",
the table of codes), with one of the statuses listed for it, and docs/openapi.json's Error
schema enumerates the same codes (so openapi_check.py also refuses an unknown code in any
answer the API tests receive). A code outside the list (401 UNAUTHORIZED, 503
SERVICE_UNAVAILABLE) is a client-visible break of the error contract, so it fails here, at
build time, rather than in a client.

The scan reads the sources, not the running server: every call of a function that takes a
`const char *code` parameter (http_reply_error, txreq_error, deny, ...), every struct table
with a `code` field (dberr rows), every assignment to a `...code` variable, and every JSON
error literal. A code argument that is neither a literal nor a variable named `...code` (which
the other rules follow to its literals) fails the test: it could not be checked."""
import json
import os
import re

from helpers import ROOT

DIRS = ("core", "routes", "rt", "domain", "db")
CODE_RE = r"[A-Z][A-Z0-9_]*"


def sources():
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, d)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.join(dirpath, f)
    yield os.path.join(ROOT, "main.c")


def strip_comments(t):
    """C text with comments blanked (strings and line numbers kept)."""
    out, i, n = [], 0, len(t)
    while i < n:
        if t.startswith("/*", i):
            j = t.index("*/", i + 2) + 2
            out.append(re.sub(r"[^\n]", " ", t[i:j]))
            i = j
        elif t.startswith("//", i):
            j = t.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif t[i] in "\"'":
            j = string_end(t, i)
            out.append(t[i:j])
            i = j
        else:
            out.append(t[i])
            i += 1
    return "".join(out)


def string_end(t, i):
    q, j = t[i], i + 1
    while t[j] != q:
        j += 2 if t[j] == "\\" else 1
    return j + 1


def split_args(t, i):
    """The top-level comma-separated items of the bracket group opening at t[i]."""
    depth, args, cur, j = 0, [], [], i
    while True:
        c = t[j]
        if c in "\"'":
            k = string_end(t, j)
            cur.append(t[j:k])
            j = k
            continue
        if c in "([{":
            depth += 1
            if depth == 1:
                j += 1
                continue
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            j += 1
            continue
        cur.append(c)
        j += 1


def literal(arg):
    m = re.fullmatch(r'"([^"\\]*)"', arg)
    return m.group(1) if m else None


def scan(texts):
    """(codes: {code: [(where, status or None)]}, problems: [str]) of the C texts {path: text}."""
    codes, problems = {}, []

    def add(code, path, t, pos, status):
        where = "%s:%d" % (os.path.relpath(path, ROOT), t.count("\n", 0, pos) + 1)
        codes.setdefault(code, []).append((where, status))

    # Functions with a `const char *code` parameter, and its position.
    emitters = {}
    for t in texts.values():
        for m in re.finditer(r"\b(\w+)\s*\(([^;{}()]*)\)\s*[;{]", t):
            params = [p.strip() for p in m.group(2).split(",")]
            for k, p in enumerate(params):
                if re.fullmatch(r"const char \*\s*code", p):
                    status = next((i for i, q in enumerate(params) if q == "int status"), None)
                    emitters[m.group(1)] = (k, status)
    # Struct types with a `const char *code` field, and the field's position.
    tables = {}
    for t in texts.values():
        for m in re.finditer(r"typedef struct \w*\s*\{([^}]*)\}\s*(\w+);", t):
            fields = [f.strip() for f in m.group(1).split(";") if f.strip()]
            if "const char *code" in fields:
                tables[m.group(2)] = (fields.index("const char *code"),
                                      fields.index("int status") if "int status" in fields
                                      else None)

    for path, t in texts.items():
        for name, (k, sk) in emitters.items():
            for m in re.finditer(r"(?<![\w.>])%s\s*\(" % name, t):
                if re.search(r"\b(void|perm_t|static|int|bool)\s+$", t[:m.start()]):
                    continue  # the definition or a declaration
                args = split_args(t, m.end() - 1)
                code = literal(args[k])
                status = args[sk] if sk is not None else \
                    "429" if name == "http_reply_rate_limited" else None
                if code is not None:
                    add(code, path, t, m.start(), status)
                elif not re.fullmatch(r"[\w.>-]*code", args[k]):
                    problems.append("%s: %s() gets code %r, which this test cannot follow" %
                                    (os.path.relpath(path, ROOT), name, args[k]))
        for type_name, (k, sk) in tables.items():
            for m in re.finditer(r"\b%s\s+\w+\s*\[\s*\w*\s*\]\s*=\s*\{" % type_name, t):
                for row in split_args(t, m.end() - 1):
                    if not row.startswith("{"):
                        continue
                    fields = split_args(row, 0)
                    code = literal(fields[k])
                    if code is not None:
                        add(code, path, t, m.start(), fields[sk] if sk is not None else None)
                    elif fields[k] != "NULL":
                        problems.append("%s: a %s row's code %r cannot be followed" %
                                        (os.path.relpath(path, ROOT), type_name, fields[k]))
        for m in re.finditer(r"\bcode\s*=\s*\"(%s)\"" % CODE_RE, t):
            add(m.group(1), path, t, m.start(), None)
        for m in re.finditer(r"[\w.>-]*_code\s*=\s*\"(%s)\"" % CODE_RE, t):
            status = re.search(r"_status\s*=\s*(\d{3});\s*$", t[:m.start()])
            add(m.group(1), path, t, m.start(), status.group(1) if status else None)
        for m in re.finditer(r"\\\"code\\\":\\\"(%s)\\\"" % CODE_RE, t):
            add(m.group(1), path, t, m.start(), None)
        # A safety net for emitters the rules above do not know: a status literal followed by an
        # upper-case string literal is an error answer in the making.
        for m in re.finditer(r"\b([1-5]\d\d)\s*,\s*\"(%s)\"" % CODE_RE, t):
            if m.group(2) not in codes:
                problems.append("%s:%d: %s %s is answered by a call this test does not know" % (
                    os.path.relpath(path, ROOT), t.count("\n", 0, m.start()) + 1, m.group(1),
                    m.group(2)))
    return codes, problems


def documented():
    """{code: set of statuses} of docs/api.md's table of error codes."""
    text = open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8").read()
    section = text[text.index("## Errors"):]
    section = section[:section.index("\n## ", 1)]
    rows = re.findall(r"^ *\| `(%s)` \| ([\d, ]+) \|" % CODE_RE, section, re.M)
    return {code: set(s.strip() for s in statuses.split(",")) for code, statuses in rows}


def load_sources():
    return {p: strip_comments(open(p, encoding="utf-8").read()) for p in sources()}


def test_every_code_the_sources_answer_is_documented():
    docs = documented()
    codes, problems = scan(load_sources())
    assert not problems, "\n".join(problems)
    # The scan finds what it must (a call, a table row, a code variable, a JSON literal), so an
    # empty or broken scan cannot pass.
    for code in ("VALIDATION_ERROR", "SESSION_CONFLICT", "ORG_CONTEXT_REQUIRED", "COOLDOWN",
                 "UNSUPPORTED_MEDIA_TYPE", "UNAVAILABLE"):
        assert code in codes, code
    unknown = {c: w for c, w in codes.items() if c not in docs}
    assert not unknown, "codes not in docs/api.md's table: %s" % json.dumps(unknown, indent=1)
    wrong = ["%s answers %s %s (docs/api.md: %s)" % (where, status, c, ", ".join(sorted(docs[c])))
             for c, uses in codes.items() for where, status in uses
             if status and re.fullmatch(r"\d{3}", status) and status not in docs[c]]
    assert not wrong, "\n".join(wrong)
    unused = set(docs) - set(codes)
    assert not unused, "documented codes no source answers: %s" % sorted(unused)


def test_openapi_enumerates_the_documented_codes():
    doc = json.load(open(os.path.join(ROOT, "docs", "openapi.json"), encoding="utf-8"))
    enum = doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]
    assert sorted(enum["enum"]) == sorted(documented())


def test_the_scan_fails_on_an_unknown_code():
    fake = {os.path.join(ROOT, "routes", "fake.c"): strip_comments(
        'static void f(http_req_t *req)\n{\n'
        '    http_reply_error(req, 401, "UNAUTHORIZED", "x");\n'
        '    txreq_error(t, 503,\n                "SERVICE_UNAVAILABLE", "y");\n'
        '    reply_somehow(req, 418, "TEAPOT");\n'
        '    http_reply_error(req, 400, pick_one(), "z");\n}\n')}
    texts = dict(load_sources(), **fake)
    codes, problems = scan(texts)
    assert "UNAUTHORIZED" in codes and "SERVICE_UNAVAILABLE" in codes
    assert any("418 TEAPOT" in p for p in problems)
    assert any("pick_one()" in p for p in problems)
