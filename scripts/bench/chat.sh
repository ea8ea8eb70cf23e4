#!/usr/bin/env bash
# scripts/bench/chat.sh: the chat endpoints on 1,000,000 messages in 2,000 mentorships
# (seed_mentorships.sql, then seed_chat.sql), as the organization's Manager, with wrk; each
# request picks one of the 2,000 mentorships at random:
#   history        GET  /api/mentorships/:id/chat/messages            (20, with reactions,
#                                                                       attachments, replies)
#   search         GET  /api/mentorships/:id/chat/messages?q=reunion   (Spanish, prefix)
#   post           POST /api/mentorships/:id/chat/messages            (push rows + publish)
#   conversations  GET  /api/chat/conversations                       (all 2,000)
# Release build (build-release), LOG_LEVEL=warn, one worker. Needs DATABASE_URL and REDIS_URL
# (a scratch database: the seeds replace their own bench rows), wrk, psql, curl.
#   BENCH_DURATION (15s), BENCH_CONNECTIONS (64), BENCH_THREADS (2), COACHD_BENCH_PORT (58191),
#   BENCH_SEED (1; 0 reuses the rows of an earlier run), BENCH_ONLY (a subset of the names)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
: "${DATABASE_URL:?set DATABASE_URL}" "${REDIS_URL:?set REDIS_URL}"
DURATION="${BENCH_DURATION:-15s}"
CONNS="${BENCH_CONNECTIONS:-64}"
THREADS="${BENCH_THREADS:-2}"
ONLY="${BENCH_ONLY:-history search post conversations}"
export PORT="${COACHD_BENCH_PORT:-58191}" HOST=127.0.0.1 WORKERS="${WORKERS:-1}"
export LOG_LEVEL=warn AUTH_RATE_LIMIT_POINTS=0 RATE_LIMITER_ENABLED=false
export MAX_CONNECTIONS_PER_IP=0 # every load client connects from 127.0.0.1
export CLIENT_KEY=bench-client-key PUBLIC_URL="http://127.0.0.1:$PORT"
export PUSH_URL="http://127.0.0.1:9/push" MAIL_DIR="${MAIL_DIR:-$(mktemp -d)}"
export STORAGE_DRIVER=local STORAGE_DIR="${STORAGE_DIR:-$(mktemp -d)}"
BASE="http://127.0.0.1:$PORT"
ORG=b0000000-0000-4000-8000-000000000001
COOKIE="auth.session_token=benchMentorshipsManagerSessionToken00000000"

[ -d build-release ] || meson setup build-release --buildtype=release >/dev/null
ninja -C build-release -j2 >/dev/null
build-release/coachd migrate
if [ "${BENCH_SEED:-1}" = 1 ]; then
    echo "seeding (2,000 mentorships, 1,000,000 chat messages)..."
    psql -X -q -v ON_ERROR_STOP=1 -d "$DATABASE_URL" -f scripts/bench/seed_mentorships.sql
    psql -X -q -v ON_ERROR_STOP=1 -d "$DATABASE_URL" -f scripts/bench/seed_chat.sql
fi

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
local kind = os.getenv("BENCH_NAME")
local n = 0
function init(args) math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16)) end
function request()
    local k = math.random(0, 1999)
    local m = string.format("b1000000-0000-4000-8000-%012x", k)
    if kind == "conversations" then return wrk.format("GET", "/api/chat/conversations") end
    local p = "/api/mentorships/" .. m .. "/chat/messages"
    if kind == "search" then return wrk.format("GET", p .. "?q=reunion") end
    if kind == "post" then
        n = n + 1
        return wrk.format("POST", p, {["Content-Type"] = "application/json",
            ["Cookie"] = "$COOKIE", ["X-Organization-Id"] = "$ORG"},
            '{"body":"Bench message ' .. n .. ': ¿nos vemos mañana para la reunión?"}')
    end
    return wrk.format("GET", p)
end
statuses = {}
local threads = {}
function setup(t) table.insert(threads, t) end
function response(status) statuses[status] = (statuses[status] or 0) + 1 end
function done(summary, latency)
    local codes = {}
    for _, t in ipairs(threads) do
        for c, c_n in pairs(t:get("statuses") or {}) do codes[c] = (codes[c] or 0) + c_n end
    end
    local parts = {}
    for c, c_n in pairs(codes) do table.insert(parts, c .. "=" .. c_n) end
    io.write(string.format("RESULT chat-%s: %.0f req/s, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms, status %s\n",
        kind, summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000,
        latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
        table.concat(parts, " ")))
end
LUA

M0="b1000000-0000-4000-8000-000000000000"
check() {
    echo "$1 -> $(curl -sf -H "Cookie: $COOKIE" -H "X-Organization-Id: $ORG" "$BASE$1" | head -c 300)..."
}
check "/api/mentorships/$M0/chat/messages?limit=2"
for name in $ONLY; do
    BENCH_NAME=$name wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s "$lua" "$BASE" | grep RESULT
done
rm -f "$lua"
