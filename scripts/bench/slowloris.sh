#!/usr/bin/env bash
# scripts/bench/slowloris.sh: GET /api/auth/session latency with and without slow clients.
# Starts coachd (build/, one worker) on its own PostgreSQL and Redis, measures wrk's p99 of
# GET /api/auth/session, then opens SLOW_COUNT (5000) slowloris connections (slowloris.py: a
# request head trickled one byte every 10 s, from 127.0.1.x source addresses, 200 per address)
# and measures again while they are held; then adds STUCK_COUNT (1000) SSE readers that never
# read (sse_stuck.py: user streams with a 4 KiB receive buffer, fed STUCK_RATE (200) events/s of
# 2 KiB through Redis, reopened when the server closes them) and measures a third time. Prints
# the RESULT lines and the load average before each; docs/reliability.md keeps them.
#
# With STUCK_READ=1 the readers read after all (the control: what the events themselves cost).
# After the third measurement it prints the bytes queued in the kernel for the streams (Send-Q
# of coachd's side) and coachd's RSS.
#
#   SLOW_COUNT (5000), STUCK_COUNT (1000, 0: none), STUCK_RATE (200), BENCH_DURATION (15s),
#   BENCH_CONNECTIONS (32), COACHD_SLOW_PORT (58181), COACHD_SLOW_PG_PORT (55433),
#   COACHD_SLOW_REDIS_PORT (55380)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
. "$ROOT/scripts/lib/deps.sh"
. "$ROOT/scripts/lib/services.sh"
cd "$ROOT"

DURATION="${BENCH_DURATION:-15s}"
CONNS="${BENCH_CONNECTIONS:-32}"
COUNT="${SLOW_COUNT:-5000}"
STUCK="${STUCK_COUNT:-1000}"
LOGS="$ROOT/.local/bench-logs"
mkdir -p "$LOGS"
deps_install
meson_build build >"$LOGS/slow-build.log" 2>&1 || { tail -n 40 "$LOGS/slow-build.log"; die "build failed"; }
services_up slow-pg "${COACHD_SLOW_PG_PORT:-55433}" slow-redis "${COACHD_SLOW_REDIS_PORT:-55380}" coachd_slow
raise_nofile

export PORT="${COACHD_SLOW_PORT:-58181}" HOST=127.0.0.1 APP_ENV=development WORKERS=1 LOG_LEVEL=warn
export AUTH_RATE_LIMIT_POINTS=0 RATE_LIMITER_ENABLED=false CLIENT_KEY=bench-client-key
export PUBLIC_URL="http://127.0.0.1:$PORT" MAIL_FROM=noreply@coachd.test PUSH_URL="http://127.0.0.1:9/push"
unset SMTP_URL
BASE="http://127.0.0.1:$PORT"
build/coachd migrate >"$LOGS/slow-migrate.log" 2>&1 || { cat "$LOGS/slow-migrate.log"; die "migrate failed"; }
if port_in_use "$PORT"; then die "port $PORT is taken"; fi
build/coachd serve >"$LOGS/slow-coachd.log" 2>&1 &
coachd_pid=$!
slow_pid=""
stuck_pid=""
cleanup() {
    if [ -n "$stuck_pid" ]; then stop_pid "$stuck_pid" 5 || true; fi
    if [ -n "$slow_pid" ]; then stop_pid "$slow_pid" 5 || true; fi
    stop_pid "$coachd_pid" 10 || true
    services_down slow-pg slow-redis
}
trap cleanup EXIT
wait_http "$BASE/api/health" 30 "$coachd_pid" -H "X-Client-Key: $CLIENT_KEY" || die "coachd did not start"

jar="$LOGS/slow-cookies.txt"
curl -sS -f -o /dev/null -c "$jar" -H 'Content-Type: application/json' \
    -d "{\"email\":\"slow-$(date +%s)-$$@example.com\",\"password\":\"wrk load phrase 123\",\"name\":\"Slow Bench\"}" \
    "$BASE/api/auth/sign-up/email" || die "sign-up failed"
token="$(awk '$6 == "auth.session_token" {print $7}' "$jar")"
export BENCH_DIR="$ROOT/scripts/bench" BENCH_COOKIE="auth.session_token=$token"

run_wrk() { # NAME
    echo "load average before $1: $(cut -d' ' -f1-3 /proc/loadavg)"
    wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s scripts/bench/get.lua "$BASE/api/auth/session" \
        >"$LOGS/slow-$1.txt" 2>&1 || true
    echo "RESULT $1: $(grep -E '^RESULT' "$LOGS/slow-$1.txt" | sed 's/^RESULT[^:]*: //' || true)"
    grep -E '^ +(50|99)%' "$LOGS/slow-$1.txt" | tr -s ' ' | sed 's/^/  /'
}

run_wrk baseline
"$PYTHON" scripts/bench/slowloris.py --port "$PORT" --count "$COUNT" >"$LOGS/slow-clients.log" 2>&1 &
slow_pid=$!
sleep 15 # all connected and a first byte each sent
tail -n 1 "$LOGS/slow-clients.log"
run_wrk "with-$COUNT-slowloris"
tail -n 1 "$LOGS/slow-clients.log"
if [ "$STUCK" -gt 0 ]; then
    psql -X -q -At -v n="$(((STUCK + 9) / 10))" -d "$DATABASE_URL" -f scripts/bench/seed_stream_users.sql \
        >"$LOGS/slow-stream-users.txt"
    "$PYTHON" scripts/bench/sse_stuck.py --port "$PORT" --users "$LOGS/slow-stream-users.txt" \
        --count "$STUCK" --rate "${STUCK_RATE:-200}" $([ "${STUCK_READ:-0}" = 1 ] && echo --read) \
        --redis "$(printf '%s' "$REDIS_URL" | sed -E 's#redis://([^/]+).*#\1#')" \
        >"$LOGS/slow-stuck.log" 2>&1 &
    stuck_pid=$!
    sleep 15 # opened, and their buffers filling
    tail -n 1 "$LOGS/slow-stuck.log"
    run_wrk "with-$COUNT-slowloris-and-$STUCK-stuck-sse"
    tail -n 1 "$LOGS/slow-stuck.log"
    tail -n 1 "$LOGS/slow-clients.log"
    # Every state: a stream the server closed with data unread waits in FIN-WAIT-1 (its FIN sits
    # behind the data the client does not take) and still holds its send queue.
    echo "coachd's side, by TCP state (connections, MB queued to send):" \
        "$(ss -Htn "( sport = :$PORT )" | awk '{n[$1]++; q[$1] += $3}
            END {for (s in n) printf "%s %d %.1f; ", s, n[s], q[s] / 1048576}')"
    for w in $(pgrep -P "$coachd_pid"); do
        echo "worker $w RSS: $(awk '/VmRSS/ {printf "%.0f MB", $2 / 1024}' "/proc/$w/status")"
    done
fi
echo "coachd log (refusals, timeouts):"
grep -c 'refused' "$LOGS/slow-coachd.log" || true
