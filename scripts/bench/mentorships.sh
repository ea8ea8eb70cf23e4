#!/usr/bin/env bash
# scripts/bench/mentorships.sh: the list endpoints on an organization of 2,000 mentorships and
# 20,000 sessions (seed_mentorships.sql), as a Manager, with wrk:
#   GET /api/mentorships?limit=50
#   GET /api/sessions?limit=50&from=...&to=...   (a 3-day window: ~6,000 matching sessions)
# Release build (build-release), LOG_LEVEL=warn, one worker. Needs DATABASE_URL and REDIS_URL
# (a scratch database: the seed replaces its own bench rows), wrk, psql, curl.
#   BENCH_DURATION (15s), BENCH_CONNECTIONS (64), BENCH_THREADS (2), COACHD_BENCH_PORT (58190)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
: "${DATABASE_URL:?set DATABASE_URL}" "${REDIS_URL:?set REDIS_URL}"
DURATION="${BENCH_DURATION:-15s}"
CONNS="${BENCH_CONNECTIONS:-64}"
THREADS="${BENCH_THREADS:-2}"
export PORT="${COACHD_BENCH_PORT:-58190}" HOST=127.0.0.1 WORKERS="${WORKERS:-1}"
export LOG_LEVEL=warn AUTH_RATE_LIMIT_POINTS=0 RATE_LIMITER_ENABLED=false
export MAX_CONNECTIONS_PER_IP=0 # every load client connects from 127.0.0.1
export CLIENT_KEY=bench-client-key PUBLIC_URL="http://127.0.0.1:$PORT"
export PUSH_URL="http://127.0.0.1:9/push" MAIL_DIR="${MAIL_DIR:-$(mktemp -d)}"
BASE="http://127.0.0.1:$PORT"
ORG=b0000000-0000-4000-8000-000000000001
COOKIE="auth.session_token=benchMentorshipsManagerSessionToken00000000"

[ -d build-release ] || meson setup build-release --buildtype=release >/dev/null
ninja -C build-release -j2 >/dev/null
build-release/coachd migrate
echo "seeding (2,000 mentorships, 20,000 sessions)..."
psql -X -q -v ON_ERROR_STOP=1 -d "$DATABASE_URL" -f scripts/bench/seed_mentorships.sql

build-release/coachd serve >"$MAIL_DIR/coachd-bench.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    curl -sf -o /dev/null "$BASE/api/health/ready" && break
    sleep 0.1
done

lua="$(mktemp --suffix=.lua)"
cat >"$lua" <<LUA
wrk.headers["Cookie"] = "$COOKIE"
wrk.headers["X-Organization-Id"] = "$ORG"
statuses = {}
local threads = {}
function setup(t) table.insert(threads, t) end
function response(status) statuses[status] = (statuses[status] or 0) + 1 end
function done(summary, latency)
    local codes = {}
    for _, t in ipairs(threads) do
        for c, n in pairs(t:get("statuses") or {}) do codes[c] = (codes[c] or 0) + n end
    end
    local parts = {}
    for c, n in pairs(codes) do table.insert(parts, c .. "=" .. n) end
    io.write(string.format("RESULT %s: %.0f req/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms, status %s\n",
        os.getenv("BENCH_NAME"), summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
        table.concat(parts, " ")))
end
LUA

check() {
    local body
    body="$(curl -sf -H "Cookie: $COOKIE" -H "X-Organization-Id: $ORG" "$BASE$1")"
    echo "$1 -> $(echo "$body" | head -c 200)... total_count $(echo "$body" | grep -o "\"total_count\" *: *[0-9]*")"
}
M_PATH="/api/mentorships?limit=50"
S_PATH="/api/sessions?limit=50&from=2030-01-03T00:00:00Z&to=2030-01-06T00:00:00Z"
check "$M_PATH"
check "$S_PATH"
BENCH_NAME=mentorships wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$lua" "$BASE$M_PATH"
BENCH_NAME=sessions wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$lua" "$BASE$S_PATH"
rm -f "$lua"
