#!/usr/bin/env bash
# Upload benchmark (issue: files and storage), local driver:
#   1. COUNT files of FILE_MB MB (random bytes, made once under .local/bench-files) copied with
#      `cp` to the same disk, PUT with `curl -T` to presigned local URLs, and sent through
#      POST /api/files/upload (multipart, curl -F): total seconds and MB/s of each.
#   2. coachd's peak RSS (VmHWM) growth over one BIG_MB upload, then over PAR concurrent
#      FILE_MB uploads.
#   3. GET /api/auth/session latency (wrk, 1 thread, 4 connections, 10 s) idle and while the PAR
#      concurrent uploads run.
#
#   scripts/bench/uploads.sh          COUNT=10 FILE_MB=100 BIG_MB=500 PAR=20
#
# Uses the private servers of scripts/run (database coachd_bench) unless DATABASE_URL /
# REDIS_URL are given; COACHD_BENCH_PORT (58182). Results also go to .local/bench-logs/uploads.txt.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
. "$ROOT/scripts/lib/deps.sh"
. "$ROOT/scripts/lib/services.sh"
cd "$ROOT"

COUNT="${COUNT:-10}"
FILE_MB="${FILE_MB:-100}"
BIG_MB="${BIG_MB:-500}"
PAR="${PAR:-20}"
PORT="${COACHD_BENCH_PORT:-58182}"
BASE="http://127.0.0.1:$PORT"
LOGS="$ROOT/.local/bench-logs"
FILES="$ROOT/.local/bench-files"
STORE="$ROOT/.local/bench-storage"
OUT="$LOGS/uploads.txt"
mkdir -p "$LOGS" "$FILES"

deps_install
meson_build build-release --buildtype=release >"$LOGS/build.log" 2>&1 || { tail -n 40 "$LOGS/build.log"; die "build failed"; }
services_up pg "${COACHD_PG_PORT:-55432}" redis "${COACHD_REDIS_PORT:-55379}" coachd_bench
build-release/coachd migrate >"$LOGS/migrate.log" 2>&1 || { cat "$LOGS/migrate.log"; die "migrate failed"; }
rm -rf "$STORE" "$ROOT/.local/bench-cp" && mkdir -p "$STORE" "$ROOT/.local/bench-cp"
if port_in_use "$PORT"; then die "port $PORT is taken"; fi
PORT="$PORT" HOST=127.0.0.1 WORKERS=1 LOG_LEVEL=warn AUTH_RATE_LIMIT_POINTS=0 MAIL_DIR=.local/bench-mail \
    STORAGE_DRIVER=local STORAGE_DIR="$STORE" PUBLIC_URL="$BASE" \
    build-release/coachd serve >"$LOGS/uploads-coachd.log" 2>&1 &
SERVER=$!
trap 'stop_pid $SERVER 10' EXIT
wait_http "$BASE/api/auth/session" 20 "$SERVER" || die "coachd did not start"
export BENCH_DIR="$ROOT/scripts/bench"

make_file() { # NAME MB
    [ -f "$FILES/$1" ] && [ "$(stat -c %s "$FILES/$1")" -eq $(($2 * 1048576)) ] && return
    head -c $(($2 * 1048576)) /dev/urandom >"$FILES/$1"
}
for i in $(seq 1 "$COUNT"); do make_file "v$i.mp4" "$FILE_MB"; done
make_file big.mp4 "$BIG_MB"
sync

# A PlatformAdmin with an organization (org context for the files routes).
jar="$LOGS/uploads-cookies.txt"
email="upbench-$(date +%s)-$$@example.com"
curl -sS -f -o /dev/null -c "$jar" -H 'Content-Type: application/json' \
    -d "{\"email\":\"$email\",\"password\":\"wrk load phrase 123\",\"name\":\"Up Bench\"}" \
    "$BASE/api/auth/sign-up/email" || die "sign-up failed"
psql -X -q -d "$DATABASE_URL" -c "UPDATE users SET global_role = 'PlatformAdmin' WHERE email = '$email'"
resp=$(curl -sS -b "$jar" -H 'Content-Type: application/json' \
    -d "{\"name\":\"Upload bench $$ $(date +%s)\"}" "$BASE/api/organizations")
org=$(printf '%s' "$resp" | grep -o '"id" *: *"[0-9a-f-]\{36\}"' | head -n 1 | grep -o '[0-9a-f-]\{36\}' || true)
[ -n "$org" ] || die "could not create the organization: $resp"
H=(-b "$jar" -H "X-Organization-Id: $org")
now() { date +%s.%N; }
rate() { awk -v s="$1" -v e="$2" -v mb="$3" 'BEGIN { printf "%.2f s, %.0f MB/s", e - s, mb / (e - s) }'; }
total_mb=$((COUNT * FILE_MB))
hwm() { awk '/VmHWM/ {print $2}' "/proc/$SERVER/status"; }
RSS_IDLE=$(awk '/VmRSS/ {print $2}' "/proc/$SERVER/status")

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?') count=$COUNT file_mb=$FILE_MB big_mb=$BIG_MB par=$PAR" | tee -a "$OUT"

t0=$(now)
for i in $(seq 1 "$COUNT"); do cp "$FILES/v$i.mp4" "$ROOT/.local/bench-cp/v$i.mp4"; done
t1=$(now)
echo "RESULT cp: $total_mb MB in $(rate "$t0" "$t1" "$total_mb")" | tee -a "$OUT"

urls=()
for i in $(seq 1 "$COUNT"); do
    urls+=("$(curl -sS -f "${H[@]}" -H 'Content-Type: application/json' \
        -d "{\"filename\":\"v$i.mp4\",\"mimeType\":\"video/mp4\",\"sizeBytes\":$((FILE_MB * 1048576))}" \
        "$BASE/api/files/presign" | sed -E 's/.*"presignedUrl":"([^"]+)".*/\1/')")
done
t0=$(now)
for i in $(seq 1 "$COUNT"); do
    curl -sS -f -o /dev/null -T "$FILES/v$i.mp4" -H 'Content-Type: video/mp4' "${urls[$((i - 1))]}"
done
t1=$(now)
echo "RESULT curl -T presigned PUT: $total_mb MB in $(rate "$t0" "$t1" "$total_mb")" | tee -a "$OUT"

t0=$(now)
for i in $(seq 1 "$COUNT"); do
    curl -sS -f -o /dev/null "${H[@]}" -F "file=@$FILES/v$i.mp4;type=video/mp4" "$BASE/api/files/upload"
done
t1=$(now)
echo "RESULT POST /api/files/upload: $total_mb MB in $(rate "$t0" "$t1" "$total_mb")" | tee -a "$OUT"

curl -sS -f -o /dev/null "${H[@]}" -F "file=@$FILES/big.mp4;type=video/mp4" "$BASE/api/files/upload"
h1=$(hwm)
echo "RESULT peak RSS over the idle RSS after every upload so far and one $BIG_MB MB upload: $(((h1 - RSS_IDLE) / 1024)) MB (idle $((RSS_IDLE / 1024)) MB, VmHWM $((h1 / 1024)) MB)" | tee -a "$OUT"

token="$(awk '$6 == "auth.session_token" {print $7}' "$jar")"
export BENCH_COOKIE="auth.session_token=$token" BENCH_NAME=session
wrk --latency -t1 -c4 -d10s -s scripts/bench/get.lua "$BASE/api/auth/session" >"$LOGS/uploads-idle.txt" 2>&1
echo "RESULT idle $(grep '^RESULT' "$LOGS/uploads-idle.txt" | sed 's/^RESULT //')" | tee -a "$OUT"

h0=$(hwm)
pids=()
for i in $(seq 1 "$PAR"); do
    f="$FILES/v$(((i - 1) % COUNT + 1)).mp4"
    curl -sS -f -o /dev/null "${H[@]}" -F "file=@$f;type=video/mp4" "$BASE/api/files/upload" &
    pids+=($!)
done
sleep 0.5
wrk --latency -t1 -c4 -d10s -s scripts/bench/get.lua "$BASE/api/auth/session" >"$LOGS/uploads-busy.txt" 2>&1
t0=$(now)
for p in "${pids[@]}"; do wait "$p" || die "a concurrent upload failed"; done
h1=$(hwm)
echo "RESULT during $PAR uploads $(grep '^RESULT' "$LOGS/uploads-busy.txt" | sed 's/^RESULT //')" | tee -a "$OUT"
echo "RESULT peak RSS over idle with $PAR concurrent $FILE_MB MB uploads: $(((h1 - RSS_IDLE) / 1024)) MB (VmHWM $((h0 / 1024)) -> $((h1 / 1024)) MB)" | tee -a "$OUT"
rm -rf "$STORE" "$ROOT/.local/bench-cp"
