"""Streams that end badly: the reduced table of tests/abuse/endings.py (its `ci` cases) against a
coachd of its own (COACHD_BIN, WORKERS=1, REQUEST_TIMEOUT_SECONDS=2,
STREAM_WRITE_TIMEOUT_SECONDS=2, its own STORAGE_DIR). Each case is one test: after the ending,
the worker must be the same process (pid, coachd_worker_restarts_total 0), coachd's stderr must
hold no sanitizer report, and the worker's descriptors, STORAGE_DIR/.tmp and (normal build) RSS
must be back at their baseline within a few seconds. The last test stops that coachd: exit
status 0 and no report at exit (LeakSanitizer on the ASan build). scripts/endings runs the full
table."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "abuse"))

import endings  # noqa: E402

CASES = [c for c in endings.build_table() if c.ci]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    srv = endings.Coachd(str(tmp_path_factory.mktemp("endings")))
    srv.start()
    try:
        h = endings.Harness(srv, endings.World(srv))
        h.warm_up(endings.warm_up_cases(CASES))
        yield h
    finally:
        if srv.proc:
            srv.stop()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ending(harness, case):
    ok, msg = harness.run_case(case)
    assert ok, msg


def test_endings_coachd_exits_clean(harness):
    rc = harness.srv.stop()
    log = harness.srv.log_text(harness.log_pos)  # what came after the last case's checks
    assert rc == 0 and not endings.SANITIZER.search(log), (
        "coachd exit status %s:\n%s" % (rc, log[-4000:]))
