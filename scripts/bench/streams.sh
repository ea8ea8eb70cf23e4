#!/usr/bin/env bash
# SSE streams benchmark: N open streams on one worker, events published through Redis, delivery
# latency and ping cadence measured by sse-load (scripts/bench/sse_load.c).
#
#   scripts/bench/streams.sh                        # 10,000 streams, 2,000 events, 40 s
#   STREAMS=19900 HOLD=60 scripts/bench/streams.sh   # the most one process may hold here
#   MODE=fanout STREAMS=10000 EVENTS=100 RATE=5 scripts/bench/streams.sh
#                                                   # each event to all 10,000 streams
#
# STREAMS, USERS (STREAMS/10; fanout: STREAMS/20), EVENTS, RATE (events/s), HOLD (seconds),
# PARALLEL (streams being opened at once, 128), PROBE_AFTER (seconds: then GET /api/auth/session
# at PROBE_RATE, 200/s, for PROBE_SECONDS, 10, on the same worker, scripts/bench/latency_probe.py:
# what the fan-out costs the worker's other requests), COACHD_BENCH_PORT (58181), COACHD_PG_PORT and
# COACHD_REDIS_PORT (the private servers' ports). MODE=user (default): user streams, each event to
# one user's streams. MODE=fanout: the users are PlatformAdmins, every stream is on one
# mentorship's channel (seed_stream_fanout.sql), so each event reaches all of them; 20 streams a
# user, STREAM_MAX_PER_USER. Uses the private servers of scripts/run (database coachd_bench)
# unless DATABASE_URL / REDIS_URL are given. The open-file limit (ulimit -Hn) bounds the streams
# one worker can hold.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
. "$ROOT/scripts/lib/deps.sh"
. "$ROOT/scripts/lib/services.sh"
cd "$ROOT"

STREAMS="${STREAMS:-10000}"
MODE="${MODE:-user}"
PER_USER=10
if [ "$MODE" = fanout ]; then PER_USER=20; fi
USERS="${USERS:-$(((STREAMS + PER_USER - 1) / PER_USER))}"
PARALLEL="${PARALLEL:-128}"
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
FANOUT=()
case "$MODE" in
user) ;;
fanout) FANOUT=(--mentorship "$(psql -X -q -At -d "$DATABASE_URL" -f scripts/bench/seed_stream_fanout.sql)") ;;
*) die "MODE is user or fanout" ;;
esac
if port_in_use "$PORT"; then die "port $PORT is taken"; fi

PORT="$PORT" HOST=0.0.0.0 WORKERS="${WORKERS:-1}" METRICS_TOKEN=bench LOG_LEVEL=warn AUTH_RATE_LIMIT_POINTS=0 MAX_CONNECTIONS=1000000 MAX_CONNECTIONS_PER_IP=0 MAIL_DIR=.local/bench-mail \
    PUSH_URL="http://127.0.0.1:9/push" build-release/coachd serve >"$LOGS/streams-coachd.log" 2>&1 &
SERVER=$!
trap 'stop_pid $SERVER 10' EXIT
wait_http "http://127.0.0.1:$PORT/api/auth/session" 20 "$SERVER" || die "coachd did not start"
# The streams live in the worker process that the master forks: measure that one.
WORKER=$(pgrep -P "$SERVER" | head -n 1)
[ -n "$WORKER" ] || WORKER=$SERVER
RSS0=$(awk '/VmRSS/ {print $2}' "/proc/$WORKER/status")
log "coachd idle RSS $((RSS0 / 1024)) MB; mode=$MODE streams=$STREAMS users=$USERS events=$EVENTS rate=$RATE/s; nofile $(ulimit -n); $(uptime)"
REDIS_HOSTPORT=$(printf '%s' "$REDIS_URL" | sed -E 's#redis://([^/]+).*#\1#')
PROBE_PID=
if [ -n "${PROBE_AFTER:-}" ]; then
    # Light requests on the same worker while events go out (scripts/bench/latency_probe.py).
    python3 scripts/bench/latency_probe.py "http://127.0.0.1:$PORT/api/auth/session" \
        --after "$PROBE_AFTER" --seconds "${PROBE_SECONDS:-10}" --rate "${PROBE_RATE:-200}" \
        >"$LOGS/probe.txt" 2>&1 &
    PROBE_PID=$!
fi
build-release/sse-load --port "$PORT" --users "$LOGS/stream-users.txt" --streams "$STREAMS" \
    --sources "$SOURCES" --redis "$REDIS_HOSTPORT" --events "$EVENTS" --rate "$RATE" --hold "$HOLD" \
    --server-pid "$WORKER" --parallel "$PARALLEL" "${FANOUT[@]}" | tee -a "$LOGS/streams.txt"
# The worker's own share: arrival of each event from Redis to its write on the last stream.
curl -s -H "Authorization: Bearer bench" "http://127.0.0.1:$PORT/metrics" |
    awk '/^coachd_stream_fanout_seconds_sum/ {s = $2} /^coachd_stream_fanout_seconds_count/ {n = $2}
         /^coachd_stream_fanout_max_seconds/ {m = $2} /^coachd_stream_deliveries_total/ {d = $2}
         END { if (n > 0) printf "server fan-out per event: mean %.2f ms, max %.2f ms (%d events, %d writes)\n", s / n * 1000, m * 1000, n, d }' |
    tee -a "$LOGS/streams.txt"
if [ -n "$PROBE_PID" ]; then
    wait "$PROBE_PID" || true
    tee -a "$LOGS/streams.txt" <"$LOGS/probe.txt"
fi
