#!/usr/bin/env bash
# scripts/bench/org_writes.sh: do writes in one organization serialize? 64 connections create
# and cancel sessions (POST /api/sessions, DELETE /api/sessions/:id, as the mentorships' Coach)
# in 64 mentorships of ONE organization, then in one mentorship in each of 64 organizations
# (seed_org_writes.sql), alternately for BENCH_ROUNDS rounds, with wrk and org_writes.lua.
# Release build (build-release), LOG_LEVEL=warn, one worker. Needs DATABASE_URL and REDIS_URL
# (a scratch database: the seed replaces its own bench rows), wrk, psql, curl.
#   BENCH_DURATION (10s), BENCH_CONNECTIONS (64), BENCH_THREADS (1), BENCH_ROUNDS (2),
#   COACHD_BENCH_PORT (58192), COACHD_BIN (build-release/coachd)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
: "${DATABASE_URL:?set DATABASE_URL}" "${REDIS_URL:?set REDIS_URL}"
DURATION="${BENCH_DURATION:-10s}"
CONNS="${BENCH_CONNECTIONS:-64}"
THREADS="${BENCH_THREADS:-1}"
ROUNDS="${BENCH_ROUNDS:-2}"
BIN="${COACHD_BIN:-build-release/coachd}"
export PORT="${COACHD_BENCH_PORT:-58192}" HOST=127.0.0.1 WORKERS="${WORKERS:-1}"
export LOG_LEVEL=warn AUTH_RATE_LIMIT_POINTS=0 RATE_LIMITER_ENABLED=false
export MAX_CONNECTIONS_PER_IP=0 # every load client connects from 127.0.0.1
export CLIENT_KEY=bench-client-key PUBLIC_URL="http://127.0.0.1:$PORT"
export PUSH_URL="http://127.0.0.1:9/push" MAIL_DIR="${MAIL_DIR:-$(mktemp -d)}"
export BENCH_DIR="$ROOT/scripts/bench"
BASE="http://127.0.0.1:$PORT"

if [ -z "${COACHD_BIN:-}" ]; then
    [ -d build-release ] || meson setup build-release --buildtype=release >/dev/null
    ninja -C build-release -j2 >/dev/null
fi
"$BIN" migrate
psql -X -q -v ON_ERROR_STOP=1 -d "$DATABASE_URL" -f scripts/bench/seed_org_writes.sql

"$BIN" serve >"$MAIL_DIR/coachd-bench.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    curl -sf -o /dev/null "$BASE/api/health/ready" && break
    sleep 0.1
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
    for mode in one many; do
        BENCH_MODE=$mode BENCH_NAME="$mode-org round $round" \
            wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s scripts/bench/org_writes.lua "$BASE" |
            grep RESULT
        echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    done
done
