#!/usr/bin/env python3
"""Fails when SQL text or a read by column number is found outside db/.

Usage: sql_outside_db.py SOURCE_ROOT

Every statement is a named statement of db/queries/*.sql and every row is read through the
generated column enums (db/README.md). This scans the C sources of core/, domain/, routes/, rt/,
cli/ and main.c for string literals that open with an SQL statement, and for db_get /
db_getlen / db_isnull / db_getll calls whose column is a number. Comments are skipped.
"""
import os
import re
import sys

FOLDERS = ['core', 'domain', 'routes', 'rt', 'cli']
# A literal that starts a statement. Bare words ("DELETE" as an HTTP method) and Redis commands
# ("SELECT %d") do not match: a statement keyword needs what follows it in SQL.
# SQL here is written in capitals; a literal that is only BEGIN, COMMIT or ROLLBACK is one too.
SQL_RE = re.compile(r'"\s*(SELECT\s+(?:[\w*(]|\$)|INSERT\s+INTO\b|UPDATE\s+\w+\s+SET\b|'
                    r'DELETE\s+FROM\b|WITH\s+\w+\s+AS\b|(?:BEGIN|COMMIT|ROLLBACK)\s*;?\s*"|'
                    r'(?:CREATE|ALTER|DROP)\s+(?:TABLE|INDEX|FUNCTION|SCHEMA)\b)')
NUMCOL_RE = re.compile(r'\bdb_(?:get|getlen|isnull|getll)\s*\(\s*[^,()]+,\s*[^,()]+,\s*\d+\s*[,)]')
COMMENT_RE = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)


def strip_comments(text):
    # Keeps line numbers: a comment becomes as many newlines as it spanned.
    return COMMENT_RE.sub(lambda m: '\n' * m.group(0).count('\n'), text)


def scan(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        text = strip_comments(f.read())
    found = []
    for lineno, line in enumerate(text.split('\n'), 1):
        if SQL_RE.search(line):
            found.append('%s:%d: SQL text outside db/: %s' % (path, lineno, line.strip()))
        if NUMCOL_RE.search(line):
            found.append('%s:%d: column read by number: %s' % (path, lineno, line.strip()))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    paths = [os.path.join(root, 'main.c')]
    for d in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, d)):
            paths += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(('.c', '.h'))]
    found = []
    for p in sorted(paths):
        if os.path.exists(p):
            found += scan(p)
    for line in found:
        print(os.path.relpath(line, root) if line.startswith(root) else line)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
