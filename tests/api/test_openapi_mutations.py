"""The schemas can fail: every answer the suite received (the first per operation and status,
openapi_check.RECORDED) is mutated, one change at a time, and each mutant must fail validation:
- each field its schema requires, dropped;
- an unknown field added to each object whose shape is fixed (additionalProperties: false).
And no object in an answer may be open (a schema without additionalProperties: false that is not a
map): an open object would accept any field a server change adds.
conftest.py runs this file last, so it sees the whole suite's answers."""
import copy

import pytest

import openapi_check
from openapi_check import DOC, is_valid

UNKNOWN = "unknownField"


def resolve(schema):
    while isinstance(schema, dict) and "$ref" in schema:
        schema = DOC["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def branch(schema, inst):
    """The schema that governs inst: refs resolved, and of a oneOf / anyOf the branch inst
    matches."""
    schema = resolve(schema)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            for sub in schema[key]:
                if is_valid(sub, inst):
                    return branch(sub, inst)
    return schema


def set_at(body, path, fn):
    out = copy.deepcopy(body)
    node = out
    for p in path[:-1]:
        node = node[p]
    fn(node, path[-1])
    return out


def mutants(schema, inst, path=()):
    """(what, where, mutated body transform) of every mutation of inst under schema; and
    ("open", where, None) for an object whose shape is not closed."""
    s = branch(schema, inst)
    if isinstance(inst, dict):
        props = s.get("properties", {})
        for r in s.get("required", []):
            if r in inst:
                yield "drop", path + (r,), lambda n, k: n.pop(k)
        extra = s.get("additionalProperties")
        if extra is False or s.get("unevaluatedProperties") is False:
            yield "add", path + (UNKNOWN,), lambda n, k: n.__setitem__(k, 1)
        elif not isinstance(extra, dict):
            yield "open", path, None
        for k, v in inst.items():
            sub = props.get(k, extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from mutants(sub, v, path + (k,))
    elif isinstance(inst, list) and inst and isinstance(s.get("items"), dict):
        yield from mutants(s["items"], inst[0], path + (0,))


def run(schema, body):
    """(caught, missed, open) lists of (what, where) for one answer."""
    caught, missed, opened = [], [], []
    for what, where, fn in mutants(schema, body):
        if what == "open":
            opened.append(("open", "/" + "/".join(map(str, where))))
            continue
        m = set_at(body, where, fn)
        (missed if is_valid(schema, m) else caught).append(
            (what, "/" + "/".join(map(str, where))))
    return caught, missed, opened


def answer_schema(method, template, status):
    op = DOC["paths"][template][method.lower()]
    return op["responses"][status]["content"]["application/json"]["schema"]


def test_a_loose_schema_is_reported():
    """The check itself can fail: an answer schema that requires nothing and stays open lets both
    mutations through."""
    loose = {"type": "object", "properties": {"id": {"type": "string"}}}
    caught, missed, opened = run(loose, {"id": "x"})
    assert caught == [] and opened == [("open", "/")]
    closed = {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}},
              "additionalProperties": False}
    caught, missed, opened = run(closed, {"id": "x"})
    assert [w for w, _ in caught] == ["drop", "add"] and missed == [] and opened == []


def test_every_recorded_answer_catches_its_mutants(request):
    described = {(m, t, s): b for (m, t, s), b in openapi_check.RECORDED.items()
                 if (m, t) in openapi_check.DESCRIBED and int(s) < 400}
    if not described:
        pytest.skip("no described answer was recorded (run with the whole API suite)")
    total, problems = 0, []
    for (method, template, status), body in sorted(described.items()):
        caught, missed, opened = run(answer_schema(method, template, status), body)
        total += len(caught)
        for what, where in missed + opened:
            problems.append("%s %s %s: %s %s" % (method, template, status, what, where))
    request.config.openapi_mutations = (len(described), total)
    print("openapi mutations: %d answers, %d mutants caught" % (len(described), total))
    assert not problems, "mutants not caught / open objects:\n" + "\n".join(problems)
