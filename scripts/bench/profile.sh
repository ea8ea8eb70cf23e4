#!/usr/bin/env bash
# scripts/bench/profile.sh: where the CPU goes per request in one scenario of the shared bench
# harness (its wrk scripts and seed state), in coachd and in the PostgreSQL backends serving it.
#
#   scripts/bench/profile.sh HARNESS_DIR URL COACHD_PID DATABASE_URL SCENARIO [SECONDS] [OUT]
#
# HARNESS_DIR holds the harness (run.sh, stateenv.mjs, lua/) and URL must have been seeded by it
# (state-<port>.json). Runs wrk (1 thread, 64 connections) for SECONDS (10) while `perf record -g`
# samples coachd and, separately, the client backends of DATABASE_URL's database (those open when
# the run starts: coachd's pool), then prints requests/s, the CPU seconds each side used per
# request (from /proc, without perf's overhead: a second wrk run without perf) and the top
# entries of `perf report --no-children` for each side. perf data and reports stay in OUT.
set -euo pipefail
HARNESS=$1 URL=$2 PID=$3 DB=$4 SC=$5 SECS=${6:-10} OUT=${7:-$(mktemp -d)}
mkdir -p "$OUT"
case "$SC" in
S1) lua=s1_session.lua cv=COOKIE_TEACHER ;; S2) lua=s2_me.lua cv=COOKIE_TEACHER ;;
S3) lua=s3_mentorships.lua cv=COOKIE_MANAGER ;; S4) lua=s4_chat_list.lua cv=COOKIE_TEACHER ;;
S5) lua=s5_chat_post.lua cv=COOKIE_TEACHER ;; *) echo "scenario S1..S5" >&2; exit 2 ;;
esac
eval "$(node "$HARNESS/stateenv.mjs" "$URL" A)"
for v in ORG MENTORSHIP EMAIL EMAIL_PATTERN EMAIL_COUNT PASSWORD; do vn="A_$v"; export "BENCH_$v=${!vn}"; done
vn="A_$cv"; export BENCH_COOKIE="${!vn}" BENCH_LUA_DIR="$HARNESS/lua" BENCH_RUN_ID="prof-$$-$RANDOM"
CLK=$(getconf CLK_TCK)
# coachd's master forks the workers: sample and count the pid given and its children.
PIDS=$(echo "$PID" $(pgrep -P "$PID" || true) | tr ' ' ',')
ticks() { local t=0 p; for p in "$@"; do
    [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$p/stat")))
  done; echo "$t"; }
# Warm-up (prepared statements, caches), then the backends of the pool.
wrk -t1 -c64 -d2s -s "$HARNESS/lua/$lua" "$URL" >/dev/null
PG=$(psql -X -At -d "$DB" -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity
  WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
echo "uptime: $(uptime)"
# 1. without perf: requests/s and CPU per request.
c0=$(ticks ${PIDS//,/ }); p0=$(ticks ${PG//,/ })
wrk -t1 -c64 -d"${SECS}s" --latency -s "$HARNESS/lua/$lua" "$URL" >"$OUT/wrk.txt"
c1=$(ticks ${PIDS//,/ }); p1=$(ticks ${PG//,/ })
rps=$(sed -n 's/^BENCH_JSON .*"rps":\([0-9.]*\).*/\1/p' "$OUT/wrk.txt")
req=$(sed -n 's/^BENCH_JSON {"requests":\([0-9]*\).*/\1/p' "$OUT/wrk.txt")
awk -v sc="$SC" -v rps="$rps" -v n="$req" -v c=$((c1 - c0)) -v p=$((p1 - p0)) -v hz="$CLK" -v s="$SECS" 'BEGIN {
  printf "%s: %.0f req/s; CPU per request: coachd %.1f us, PostgreSQL %.1f us (coachd %.0f%%, PostgreSQL %.0f%% of a core)\n",
    sc, rps, c / hz / n * 1e6, p / hz / n * 1e6, c / hz / s * 100, p / hz / s * 100 }' | tee "$OUT/summary.txt"
# 2. with perf.
perf record -F 999 -g -o "$OUT/coachd.data" -p "$PIDS" -- sleep "$SECS" 2>/dev/null &
r1=$!
perf record -F 999 -g -o "$OUT/pg.data" -p "$PG" -- sleep "$SECS" 2>/dev/null &
r2=$!
wrk -t1 -c64 -d"${SECS}s" -s "$HARNESS/lua/$lua" "$URL" >"$OUT/wrk-perf.txt"
wait "$r1" "$r2" || true
for side in coachd pg; do
  perf report -i "$OUT/$side.data" --no-children --stdio --sort symbol --percent-limit 1 -g none \
    2>/dev/null | grep -E '^ +[0-9]' | head -15 >"$OUT/$side-top.txt" || true
  echo "-- $side, top entries (perf report --no-children --sort symbol)"
  cat "$OUT/$side-top.txt"
done
