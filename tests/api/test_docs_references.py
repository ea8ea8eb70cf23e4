"""Every source file the READMEs, docs and comments name exists: a path such as routes/dbreq.c
(from the root, or the end of a longer one: `core/test_http_loop.c` in tests/README.md), a
generated header db/q_<area>.h (its db/queries/<area>.sql), and each file of a folder README's
table (`events.c/.h` names events.c and events.h), in one row only. Runs on the checkout, not
on the server."""
import os
import re
import subprocess

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOP = ("cli", "core", "db", "deploy", "docs", "domain", "routes", "rt", "scripts", "tests")
EXT = r"(?:c|h|md|sql|py|sh|js|json|build)"
PATH = re.compile(r"(?<![\w./<-])((?:%s)/[\w./-]*\w\.%s)\b" % ("|".join(TOP), EXT))
SELF = "tests/api/test_docs_references.py"  # its own examples name missing files
ROW = re.compile(r"^\| ([^|]*`[^|]*) \|", re.M)
NAME = re.compile(r"`([\w-]+)\.(%s)((?:/\.%s)*)`" % (EXT, EXT))


def repo_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [f for f in out.split() if not f.startswith("subprojects/") and "node_modules" not in f]


def dangling(files, read):
    """(file, line, name) for every reference to a file that is not there."""
    have = set(files)
    suffixes = {f.split("/", i)[-1] for f in files for i in range(1, f.count("/") + 1)}
    bad = []
    for f in files:
        if f == SELF or not f.endswith((".md", ".c", ".h", ".py", ".sh", ".sql", "meson.build")):
            continue
        text = read(f)
        for m in PATH.finditer(text):
            ref = m.group(1)
            if "NNNN" in ref:  # a pattern (db/migrations/NNNN_name.sql), not a file
                continue
            gen = re.fullmatch(r"db/q_(\w+)\.h", ref)
            if gen:
                ref = "db/queries/%s.sql" % gen.group(1)
            if ref in have or ref in suffixes:
                continue
            bad.append((f, text.count("\n", 0, m.start()) + 1, m.group(1)))
        if f.endswith("README.md"):
            folder = os.path.dirname(f)
            seen = set()
            for row in ROW.finditer(text):
                for n in NAME.finditer(row.group(1)):
                    exts = [n.group(2)] + [e for e in n.group(3).split("/.") if e]
                    for e in exts:
                        name = "%s.%s" % (n.group(1), e)
                        path = "%s/%s" % (folder, name) if folder else name
                        line = text.count("\n", 0, row.start()) + 1
                        if path not in have:
                            bad.append((f, line, name))
                        elif path in seen:
                            bad.append((f, line, name + " (a second row)"))
                        seen.add(path)
    return bad


def test_named_files_exist():
    def read(f):
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    bad = dangling(repo_files(), read)
    assert not bad, "files named but not there, or twice in a table:\n" + \
        "\n".join("%s:%d: %s" % b for b in bad)


def test_check_can_fail():
    files = ["rt/README.md", "rt/events.c", "rt/events.h", "routes/sessions.c", "db/queries/x.sql",
             "tests/unit/core/test_http_loop.c"]
    text = {"rt/README.md": "| file | what |\n|---|---|\n| `events.c/.h`, `gone.c` | x |\n"
                            "| `events.c` | again |\n",
            "routes/sessions.c": "/* through routes/dberr.c; db/q_x.h, db/q_y.h,\n"
                                 " * core/test_http_loop.c */\n"}
    bad = dangling(files, lambda f: text.get(f, ""))
    assert bad == [("rt/README.md", 3, "gone.c"), ("rt/README.md", 4, "events.c (a second row)"),
                   ("routes/sessions.c", 1, "routes/dberr.c"),
                   ("routes/sessions.c", 1, "db/q_y.h")], bad
