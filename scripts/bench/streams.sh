#!/usr/bin/env bash
# SSE streams benchmark: N open streams on one worker, events published through Redis, delivery
# latency and ping cadence measured by sse-load (scripts/bench/sse_load.c).
#
#   scripts/bench/streams.sh                        # 10,000 streams, 2,000 events, 40 s
#   STREAMS=19000 HOLD=60 scripts/bench/streams.sh   # the most one process may hold here
#
# STREAMS, USERS (STREAMS/10), EVENTS, RATE (events/s), HOLD (seconds), COACHD_BENCH_PORT (58181).
# Uses the private servers of scripts/run (database coachd_bench) unless DATABASE_URL /
# REDIS_URL are given. The open-file limit (ulimit -Hn) bounds the streams one worker can hold.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
. "$ROOT/scripts/lib/deps.sh"
. "$ROOT/scripts/lib/services.sh"
cd "$ROOT"

STREAMS="${STREAMS:-10000}"
USERS="${USERS:-$((STREAMS / 10 > 0 ? STREAMS / 10 : 1))}"
EVENTS="${EVENTS:-2000}"
RATE="${RATE:-100}"
HOLD="${HOLD:-40}"
PORT="${COACHD_BENCH_PORT:-58181}"
SOURCES="${SOURCES:-127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4}"
LOGS="$ROOT/.local/bench-logs"
mkdir -p "$LOGS"

deps_install
meson_build build-release --buildtype=release >"$LOGS/build.log" 2>&1 || { tail -n 40 "$LOGS/build.log"; die "build failed"; }
services_up pg "${COACHD_PG_PORT:-55432}" redis "${COACHD_REDIS_PORT:-55379}" coachd_bench
raise_nofile
build-release/coachd migrate >"$LOGS/migrate.log" 2>&1 || { cat "$LOGS/migrate.log"; die "migrate failed"; }
psql -X -q -At -v n="$USERS" -d "$DATABASE_URL" -f scripts/bench/seed_stream_users.sql >"$LOGS/stream-users.txt"
if port_in_use "$PORT"; then die "port $PORT is taken"; fi

PORT="$PORT" HOST=0.0.0.0 WORKERS=1 LOG_LEVEL=warn AUTH_RATE_LIMIT_POINTS=0 MAX_CONNECTIONS=1000000 MAX_CONNECTIONS_PER_IP=0 MAIL_DIR=.local/bench-mail \
    PUSH_URL="http://127.0.0.1:9/push" build-release/coachd serve >"$LOGS/streams-coachd.log" 2>&1 &
SERVER=$!
trap 'stop_pid $SERVER 10' EXIT
wait_http "http://127.0.0.1:$PORT/api/auth/session" 20 "$SERVER" || die "coachd did not start"
# The streams live in the worker process that the master forks: measure that one.
WORKER=$(pgrep -P "$SERVER" | head -n 1)
[ -n "$WORKER" ] || WORKER=$SERVER
RSS0=$(awk '/VmRSS/ {print $2}' "/proc/$WORKER/status")
log "coachd idle RSS $((RSS0 / 1024)) MB; streams=$STREAMS users=$USERS events=$EVENTS rate=$RATE/s; nofile $(ulimit -n)"
REDIS_HOSTPORT=$(printf '%s' "$REDIS_URL" | sed -E 's#redis://([^/]+).*#\1#')
build-release/sse-load --port "$PORT" --users "$LOGS/stream-users.txt" --streams "$STREAMS" \
    --sources "$SOURCES" --redis "$REDIS_HOSTPORT" --events "$EVENTS" --rate "$RATE" --hold "$HOLD" \
    --server-pid "$WORKER" | tee -a "$LOGS/streams.txt"
