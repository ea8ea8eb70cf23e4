"""Which writes must invalidate the caller-context cache follows from the data, not from memory
(routes/ctx_cache.h): every named statement in db/queries/*.sql that writes a table the caller
row reads (db/queries/context.sql, context_caller) -- directly, in a CTE, through a function it
calls or a trigger the write fires -- must be run from route code that reaches a
ctx_invalidate_then* call of a matching kind, unless ALLOWED below says why it cannot change a
cached caller context. A new write that forgets fails here.

Static reading of the sources, no server: a use site of SQL_<NAME> starts at the callback passed
along with it (else at the function that holds it), and follows every function of the same file
that the code mentions from there (calls and callbacks alike)."""
import collections
import glob
import os
import re
import sys


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "db"))
import gen_queries  # noqa: E402  (the parser that compiles db/queries into the binary)

# The tables context_caller reads, and the invalidation kinds that drop what each one feeds
# ('s' a session, 'u' every session of a user, 'e' the user with an email, 'o' every caller whose
# active or current organization it is).
KINDS = {
    "sessions": {"s", "u"},
    "users": {"u", "e"},
    "organization_memberships": {"u", "o"},
    "invites": {"e", "u"},
    "organizations": {"o"},
}

# Statements that write those tables but cannot change a context that is already cached.
ALLOWED = {
    # Inserts a new user and its first session (no cached context has that token or that user);
    # the session it deletes, the one whose cookie the request carried, is dropped with kind 's'
    # in routes/auth.c signed_in (test_session_management.py shows it on another coachd). The
    # check here is per statement, and 's' does not cover the new user row, hence the entry.
    "auth_sign_up": "new user and session; the ended session is invalidated with 's'",
    # The second step of a sign-in (routes/two_factor.c): a new session with a new token.
    "two_factor_complete": "new session only",
    # The guard's own sliding refresh: it only moves a session's expiry later, and the worker
    # that ran it drops its own entry (ctx_cache_drop_session_local); elsewhere the cached,
    # earlier expiry can only end the session sooner, never let it live longer.
    "context_refresh": "expiry moved later; stale copies err on the safe side",
    # A new organization with a new id: no cached context names it.
    "org_create": "new organization only",
    # The caller row reads organizations.id alone, which a logo never changes.
    "files_set_logo": "the caller row reads no organization column but its id",
    # Inserts a new user (ON CONFLICT DO NOTHING) and marks the invite accepted only when that
    # user was created, so no account, let alone a session, had that email before.
    "invite_accept": "new user only; the invite's email had no account",
    # A new user, created by staff or by the first-run setup: no session of theirs exists yet.
    "user_create": "new user only",
    "setup_create_admin": "new user only",
    # coachd seed-demo (cli/seed_demo.c) writes only when none of its emails, accounts' or
    # invitees', has an account: new users, new organizations, the new users' memberships,
    # current organizations and accepted invites, and pending invites for addresses that have no
    # account. No cached context names any of them.
    "demo_users": "new users only",
    "demo_organizations": "new organizations only",
    "demo_members": "the new users' memberships, current organizations and invites only",
    "demo_invites": "pending invites for addresses without an account",
    # coachd end-sessions (cli/end_sessions.c), an operator command outside the server: after
    # the commit it publishes the invalidation itself on CTX_CHANNEL (ctx_invalidation_message:
    # 'u' for the account, everything for --all). test_end_sessions_cli.py shows a running
    # coachd refusing the cached contexts at the next request.
    "user_sessions_end_every": "operator command; publishes the invalidation itself",
    "user_sessions_end_email": "operator command; publishes the invalidation itself",
    # rt/janitor.c deletes only sessions whose expires_at has passed; a cached context carries
    # that expiry and the guard refuses it on a hit (routes/ctx_cache.h), so the row's deletion
    # changes nothing a worker could still serve.
    "janitor_clean": "expired sessions only; the cache refuses them by their expiry",
}

WRITE_RE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(?:ONLY\s+)?([a-z_][a-z0-9_]*)",
                      re.I)
INVALIDATE_RE = re.compile(r"\bctx_invalidate_then(?:_reply)?\s*\(\s*[^,]+,\s*'(\w)'")
FUNC_DEF_RE = re.compile(
    r"^(?:static\s+)?(?:inline\s+)?[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(([^;{}]*)\)\s*\n\{",
    re.M)


def strip_sql_comments(sql):
    return re.sub(r"--[^\n]*", "", sql)


def written(sql):
    return {m.group(1).lower() for m in WRITE_RE.finditer(strip_sql_comments(sql))}


def sql_functions():
    """{function name: tables its body writes (and those of the functions it calls)}, from the
    migrations; and {table: tables its triggers write}."""
    bodies = {}
    triggers = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "db", "migrations", "*.sql"))):
        text = strip_sql_comments(open(path, encoding="utf-8").read())
        for m in re.finditer(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(\w+)\s*\(([^;]*?)"
                             r"(\$\w*\$)(.*?)\3", text, re.S | re.I):
            bodies[m.group(1).lower()] = m.group(4)
        for m in re.finditer(r"CREATE\s+TRIGGER\s+\w+\s+(.*?)\bON\s+(\w+)(.*?)EXECUTE\s+"
                             r"(?:FUNCTION|PROCEDURE)\s+(\w+)", text, re.S | re.I):
            if re.search(r"\b(INSERT|UPDATE|DELETE)\b", m.group(1), re.I):
                triggers.setdefault(m.group(2).lower(), set()).add(m.group(4).lower())
    writes = {name: written(body) for name, body in bodies.items()}
    changed = True
    while changed:  # through functions that call functions
        changed = False
        for name, body in bodies.items():
            for other in bodies:
                if other != name and re.search(r"\b%s\s*\(" % other, body, re.I):
                    if not writes[other] <= writes[name]:
                        writes[name] |= writes[other]
                        changed = True
    return writes, triggers


def statement_writes(sql, fn_writes, triggers):
    tables = written(sql)
    for name, tabs in fn_writes.items():
        if re.search(r"\b%s\s*\(" % name, sql, re.I):
            tables |= tabs
    seen = set()
    while True:  # what the triggers of written tables write
        more = set()
        for t in tables - seen:
            for fn in triggers.get(t, ()):
                more |= fn_writes.get(fn, set())
        seen |= tables
        if more <= tables:
            return tables
        tables |= more


def caller_tables():
    """The tables context_caller reads (FROM / JOIN), checked against KINDS."""
    for name, _, _, sql in gen_queries.parse(os.path.join(ROOT, "db", "queries", "context.sql")):
        if name == "context_caller":
            return {t.lower() for t in re.findall(r"\b(?:FROM|JOIN)\s+([a-z_]+)",
                                                   strip_sql_comments(sql), re.I)}
    raise AssertionError("context_caller not found")


def c_functions(text):
    """{name: body} of the functions defined in a C file (at column 0, K&R braces)."""
    out = {}
    for m in FUNC_DEF_RE.finditer(text):
        end = text.find("\n}\n", m.end())
        out[m.group(1)] = (m.start(), end if end >= 0 else len(text), text[m.end():end])
    return out


def call_args(text, pos):
    """(callee, [arguments]) of the innermost call around `pos`."""
    depth = 0
    i = pos
    while i > 0:
        i -= 1
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            if depth == 0:
                break
            depth -= 1
    j, depth = pos, 0
    while j < len(text):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            if depth == 0:
                break
            depth -= 1
        j += 1
    callee = re.search(r"(\w+)\s*$", text[:i])
    args, depth, cur = [], 0, ""
    for ch in text[i + 1:j]:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += ch
    args.append(cur.strip())
    return (callee.group(1) if callee else None), args


def starts_of(text, funcs, pos):
    """The functions a use of a statement at `pos` starts from: the callback passed in the same
    call when it is a function of this file; when it is a parameter of the enclosing function,
    the callbacks every caller in this file passes for it; else the enclosing function."""
    holder = None
    for name, (start, end, _) in funcs.items():
        if start <= pos < end:
            holder = name
    _, args = call_args(text, pos)
    last = args[-1] if args else ""
    if last in funcs:
        return [last]
    if holder and re.fullmatch(r"[A-Za-z_]\w*", last):
        head = text[funcs[holder][0]:text.index("{", funcs[holder][0])]
        params = [re.findall(r"\w+", a)[-1] if re.findall(r"\w+", a) else ""
                  for a in head[head.index("(") + 1:head.rindex(")")].split(",")]
        if last in params:
            k = params.index(last)
            out = []
            for m in re.finditer(r"\b%s\s*\(" % holder, text):
                if m.start() == funcs[holder][0] or text[m.start():].startswith(holder) and \
                        funcs[holder][0] <= m.start() < funcs[holder][0] + len(head):
                    continue
                _, a = call_args(text, m.end())
                if k < len(a) and a[k] in funcs:
                    out.append(a[k])
            if out:
                return out
    return [holder] if holder else []


def kinds_reached(funcs, start, elsewhere=None):
    """The invalidation kinds of every ctx_invalidate_then* reachable from `start`: through the
    functions of its file (`funcs`), and through a function of another file (`elsewhere`: the
    names defined in exactly one file, as auth_end_session_then of routes/auth.c)."""
    elsewhere = elsewhere or {}
    seen, todo, kinds = set(), [(funcs, start)], set()
    while todo:
        scope, name = todo.pop()
        if name in seen or name not in scope:
            continue
        seen.add(name)
        body = scope[name][2]
        kinds |= set(INVALIDATE_RE.findall(body))
        for ident in set(re.findall(r"\b[A-Za-z_]\w*\b", body)):
            if ident in seen:
                continue
            if ident in scope:
                todo.append((scope, ident))
            elif ident in elsewhere:
                todo.append((elsewhere[ident], ident))
    return kinds


def sources():
    paths = []
    for d in ("routes", "rt", "domain", "core"):
        paths += glob.glob(os.path.join(ROOT, d, "*.c"))
    return sorted(paths + [os.path.join(ROOT, "main.c")])


def problems():
    """[(statement, message)] of every write of a caller table that no invalidation follows."""
    tables = caller_tables()
    assert tables == set(KINDS), "the caller row reads %s; update KINDS" % sorted(tables)
    fn_writes, triggers = sql_functions()
    texts = {p: open(p, encoding="utf-8").read() for p in sources()}
    funcs = {p: c_functions(t) for p, t in texts.items()}
    defined = collections.Counter(n for f in funcs.values() for n in f)
    elsewhere = {n: f for f in funcs.values() for n in f if defined[n] == 1}
    out, writers = [], set()
    for path in sorted(glob.glob(os.path.join(ROOT, "db", "queries", "*.sql"))):
        for name, _, _, sql in gen_queries.parse(path):
            hit = statement_writes(sql, fn_writes, triggers) & tables
            if not hit:
                continue
            writers.add(name)
            if name in ALLOWED:
                continue
            need = set.union(*(KINDS[t] for t in hit)) if hit else set()
            # each table needs one of its own kinds
            const = "SQL_" + name.upper()
            uses = [(p, m.start()) for p, t in texts.items()
                    for m in re.finditer(r"\b%s\b" % const, t)]
            if not uses:
                out.append((name, "writes %s but no route code runs it" % sorted(hit)))
                continue
            for p, pos in uses:
                starts = starts_of(texts[p], funcs[p], pos)
                if not starts:
                    out.append((name, "%s in %s: no function found around it" % (
                        const, os.path.relpath(p, ROOT))))
                for start in starts:
                    got = kinds_reached(funcs[p], start, elsewhere)
                    missing = [t for t in sorted(hit) if not (KINDS[t] & got)]
                    if missing:
                        out.append((name, "%s (%s, from %s) writes %s and reaches no "
                                    "ctx_invalidate_then* of kind %s" % (
                                        const, os.path.relpath(p, ROOT), start, missing,
                                        " or ".join(sorted(need)))))
    for name in sorted(set(ALLOWED) - writers):
        out.append((name, "allowlisted but writes no table of the caller row (stale entry)"))
    return out


def test_every_write_of_a_caller_table_invalidates_the_matching_contexts():
    found = problems()
    assert not found, "\n".join("%s: %s" % p for p in found)


def test_the_enumeration_sees_the_writes():
    """The check is not vacuous: it finds the statements it must, with their route code."""
    fn_writes, triggers = sql_functions()
    names = set()
    for path in glob.glob(os.path.join(ROOT, "db", "queries", "*.sql")):
        for name, _, _, sql in gen_queries.parse(path):
            if statement_writes(sql, fn_writes, triggers) & set(KINDS):
                names.add(name)
    for must in ("auth_sign_out", "recovery_verify", "member_update", "invite_accept_id",
                 "invite_decline_id", "me_switch", "user_update", "account_password_set"):
        assert must in names


if __name__ == "__main__":
    for p in problems():
        print("%s: %s" % p)
