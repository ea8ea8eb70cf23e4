#!/usr/bin/env bash
# scripts/bench/run.sh: release build, coachd on a bench port with the auth limiter off, then
# wrk runs of README.md's benchmarks. Results: the RESULT lines printed, also appended to
# .local/bench-logs/results.txt; coachd's log: .local/bench-logs/coachd.log.
#
#   BENCH_DURATION (15s), BENCH_CONNECTIONS (64), BENCH_THREADS (2), COACHD_BENCH_PORT (58180),
#   WORKERS (1), BENCH_ONLY (space-separated subset of: session me signin)
# DATABASE_URL / REDIS_URL are honoured; otherwise the private servers of scripts/run are used
# (database coachd_bench) and left running, as scripts/run leaves them.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
. "$ROOT/scripts/lib/deps.sh"
. "$ROOT/scripts/lib/services.sh"
cd "$ROOT"

DURATION="${BENCH_DURATION:-15s}"
CONNS="${BENCH_CONNECTIONS:-64}"
THREADS="${BENCH_THREADS:-2}"
ONLY="${BENCH_ONLY:-session me signin}"
LOGS="$ROOT/.local/bench-logs"
mkdir -p "$LOGS"

deps_install
log "build: build-release (buildtype=release)"
meson_build build-release --buildtype=release >"$LOGS/build.log" 2>&1 || { tail -n 40 "$LOGS/build.log"; die "build failed"; }
services_up pg "${COACHD_PG_PORT:-55432}" redis "${COACHD_REDIS_PORT:-55379}" coachd_bench
raise_nofile

export PORT="${COACHD_BENCH_PORT:-58180}" HOST=127.0.0.1 APP_ENV=development
export WORKERS="${WORKERS:-1}" LOG_LEVEL="${LOG_LEVEL:-warn}"
export AUTH_RATE_LIMIT_POINTS=0 RATE_LIMITER_ENABLED=false
export MAX_CONNECTIONS_PER_IP=0 # every load client connects from 127.0.0.1
export CLIENT_KEY=bench-client-key
export PUBLIC_URL="http://127.0.0.1:$PORT" MAIL_FROM="${MAIL_FROM:-noreply@coachd.test}"
# Nothing leaves this machine: mail goes to .eml files, push to a closed local port.
unset SMTP_URL
export PUSH_URL="http://127.0.0.1:9/push"
# Placeholder video credentials (no token is asked for): /api/health answers 503 while any check
# fails, and health-during-signin measures its 200.
export VIDEO_APP_ID="${VIDEO_APP_ID:-bench-video-app-id}"
export VIDEO_APP_CERTIFICATE="${VIDEO_APP_CERTIFICATE:-bench-video-app-certificate}"
BASE="http://127.0.0.1:$PORT"

build-release/coachd migrate >"$LOGS/migrate.log" 2>&1 || { cat "$LOGS/migrate.log"; die "migrate failed"; }
if port_in_use "$PORT"; then die "port $PORT is taken"; fi
build-release/coachd serve >"$LOGS/coachd.log" 2>&1 &
coachd_pid=$!
cleanup() {
    stop_pid "$coachd_pid" 10 || true
}
trap cleanup EXIT
wait_http "$BASE/api/health" 30 "$coachd_pid" -H "X-Client-Key: $CLIENT_KEY" ||
    { tail -n 40 "$LOGS/coachd.log"; die "coachd did not answer on $BASE"; }

# The bench user: sign-up signs in and sets the session cookie.
export BENCH_DIR="$ROOT/scripts/bench" BENCH_CLIENT_KEY="$CLIENT_KEY"
BENCH_EMAIL="bench-$(date +%s)-$$@example.com"
export BENCH_EMAIL BENCH_PASSWORD="wrk load phrase 123"
jar="$LOGS/cookies.txt"
curl -sS -f -o /dev/null -c "$jar" -H 'Content-Type: application/json' \
    -d "{\"email\":\"$BENCH_EMAIL\",\"password\":\"$BENCH_PASSWORD\",\"name\":\"Bench User\"}" \
    "$BASE/api/auth/sign-up/email" || die "sign-up failed"
token="$(awk '$6 == "auth.session_token" {print $7}' "$jar")"
[ -n "$token" ] || die "sign-up set no auth.session_token cookie"
export BENCH_COOKIE="auth.session_token=$token"

results="$LOGS/results.txt"
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?') workers=$WORKERS -t$THREADS -c$CONNS -d$DURATION" >>"$results"

bench() { # NAME SCRIPT PATH [wrk args...]
    local name="$1" script="$2" path="$3"
    shift 3
    log "wrk $name: $path"
    BENCH_NAME="$name" wrk --latency "$@" -s "$BENCH_DIR/$script" "$BASE$path" >"$LOGS/$name.txt" 2>&1
    grep '^RESULT' "$LOGS/$name.txt" | tee -a "$results"
}

for b in $ONLY; do
    case "$b" in
        session) bench session get.lua /api/auth/session -t"$THREADS" -c"$CONNS" -d"$DURATION" ;;
        me) bench users-me get.lua /api/users/me -t"$THREADS" -c"$CONNS" -d"$DURATION" ;;
        signin)
            # Sign-in (argon2id on the thread pool) under load while a light health probe
            # measures how long the loop keeps other requests waiting.
            bench health-during-signin health.lua /api/health -t1 -c1 -d"$DURATION" &
            probe=$!
            # Sign-ins queue for the hashing threads, so allow them a long answer time.
            bench signin signin.lua /api/auth/sign-in/email -t"$THREADS" -c"$CONNS" -d"$DURATION" --timeout 10s
            wait "$probe"
            ;;
        *) die "unknown benchmark: $b" ;;
    esac
done
log "results appended to .local/bench-logs/results.txt"
