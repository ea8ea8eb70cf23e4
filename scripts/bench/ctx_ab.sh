#!/usr/bin/env bash
# scripts/bench/ctx_ab.sh B_BINARY: the caller-context cache's cost, this build (A,
# build-release/coachd) against another coachd binary (B, e.g. a release build of the commit
# before a change), alternately in one run, on the same PostgreSQL and Redis:
#   S1 GET /api/auth/session and S2 GET /api/users/me (wrk, the bench user's cookie), and
#   revocation.py on one server with two workers (sign-out latency: an invalidating write, and
#   the time until the first refusal).
# Only one server runs at a time (both would answer the same Redis channel).
#
# Environment: ROUNDS (2), DURATION (5s), CONNS (64), THREADS (1), SIGNOUTS (300),
# COACHD_PG_PORT (55432), COACHD_REDIS_PORT (55379), COACHD_BENCH_PORT (58180).
# Prints one RESULT line per run; the load average before each.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
. "$ROOT/scripts/lib/services.sh"
cd "$ROOT"

B_BIN="${1:?usage: ctx_ab.sh B_BINARY}"
A_BIN="$ROOT/build-release/coachd"
ROUNDS="${ROUNDS:-2}" DURATION="${DURATION:-5s}" CONNS="${CONNS:-64}" THREADS="${THREADS:-1}"
SIGNOUTS="${SIGNOUTS:-300}"
LOGS="$ROOT/.local/bench-logs"
mkdir -p "$LOGS"
[ -x "$A_BIN" ] || die "build build-release first (meson setup build-release --buildtype=release)"

services_up bench-pg "${COACHD_PG_PORT:-55432}" bench-redis "${COACHD_REDIS_PORT:-55379}" coachd_bench
raise_nofile
export PORT="${COACHD_BENCH_PORT:-58180}" HOST=127.0.0.1 APP_ENV=development LOG_LEVEL=warn
export AUTH_RATE_LIMIT_POINTS=0 RATE_LIMITER_ENABLED=false MAX_CONNECTIONS_PER_IP=0
export CLIENT_KEY=bench-client-key PUBLIC_URL="http://127.0.0.1:$PORT" PUSH_URL="http://127.0.0.1:9/push"
unset SMTP_URL
BASE="http://127.0.0.1:$PORT"
"$A_BIN" migrate >"$LOGS/migrate.log" 2>&1 || { cat "$LOGS/migrate.log"; die "migrate failed"; }

pid=""
start() { # BINARY WORKERS
    WORKERS="$2" "$1" serve >"$LOGS/ctx_ab-coachd.log" 2>&1 &
    pid=$!
    wait_http "$BASE/api/health" 30 "$pid" -H "X-Client-Key: $CLIENT_KEY" || die "coachd did not start"
}
stop() { stop_pid "$pid" 10 || true; pid=""; }
trap stop EXIT

start "$A_BIN" 1
email="ctxab-$(date +%s)-$$@example.com"
jar="$LOGS/ctx_ab-cookies.txt"
curl -sS -f -o /dev/null -c "$jar" -H 'Content-Type: application/json' \
    -d "{\"email\":\"$email\",\"password\":\"wrk load phrase 123\",\"name\":\"Bench User\"}" \
    "$BASE/api/auth/sign-up/email" || die "sign-up failed"
export BENCH_COOKIE="auth.session_token=$(awk '$6 == "auth.session_token" {print $7}' "$jar")"
export BENCH_DIR="$ROOT/scripts/bench" BENCH_CLIENT_KEY="$CLIENT_KEY"
stop

for round in $(seq "$ROUNDS"); do
    for side in A B; do
        bin="$A_BIN"
        [ "$side" = B ] && bin="$B_BIN"
        start "$bin" 1
        for s in "S1 /api/auth/session" "S2 /api/users/me"; do
            set -- $s
            echo "load $(cut -d' ' -f1 /proc/loadavg)"
            BENCH_NAME="$side-$1-r$round" wrk --latency -t"$THREADS" -c"$CONNS" -d"$DURATION" \
                -s "$BENCH_DIR/get.lua" "$BASE$2" 2>&1 | grep '^RESULT'
        done
        stop
        start "$bin" 2
        echo "load $(cut -d' ' -f1 /proc/loadavg)"
        echo "$side-signout-r$round: $(python3 "$BENCH_DIR/revocation.py" "$BASE" "$BASE" \
            "$DATABASE_URL" "$SIGNOUTS" | grep -E 'sign-out latency|refusal|stale' | tr '\n' ' ')"
        stop
    done
done
