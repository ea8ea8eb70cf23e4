#!/bin/sh
# Calendar feeds: what a feed costs and whether rendering one holds up the worker's other
# requests.
#
# Seeds a Coach with SESSIONS (5000, the feed's cap) sessions over the next year in 20
# mentorships and two feeds of known tokens (scripts/bench/seed_calendar_feed.sql), then, against
# a running coachd:
#   1. wrk on the Coach's feed (SESSIONS events, about 4.7 MB)
#   2. wrk on a Teacher's feed (SESSIONS / 20 events)
#   3. wrk on the Coach's feed with If-None-Match: its ETag (304)
#   4. GET /api/health/live at PROBE_RATE (200/s) on one connection
#      (scripts/bench/latency_probe.py), alone and then while 1 runs: the probe's p99 and max show
#      how long the loop stops for a feed (with the rendering on the thread pool, the reading
#      of the rows; before it, their rendering and hashing too)
# and prints requests/s, latency and transfer of each.
#
# Environment:
#   COACHD_URL    base URL of the running coachd (required); run it from a release build with
#                 WORKERS=1 and LOG_LEVEL=warn (docs/performance.md)
#   DATABASE_URL  its database (required; the seed writes there)
#   SESSIONS (5000), DURATION (10s), CONNECTIONS (8), THREADS (2), PROBE_RATE (200)
set -eu

: "${COACHD_URL:?set COACHD_URL to the running coachd}"
: "${DATABASE_URL:?set DATABASE_URL to its database}"
SESSIONS=${SESSIONS:-5000}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-8}
THREADS=${THREADS:-2}
PROBE_RATE=${PROBE_RATE:-200}
HERE=$(dirname "$0")
BIG="$COACHD_URL/api/calendar/benchCalendarFeedCoachToken00000000000000000.ics"
SMALL="$COACHD_URL/api/calendar/benchCalendarFeedTeacherToken0000000000000000.ics"

psql -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -v sessions="$SESSIONS" \
    -f "$HERE/seed_calendar_feed.sql"

events() {
    curl -s "$1" | grep -c '^BEGIN:VEVENT' || true
}

run() {
    name=$1
    url=$2
    shift 2
    status=$(curl -s -o /dev/null -w '%{http_code}' "$@" "$url")
    case $status in
    200 | 304) ;;
    *)
        printf '%-26s skipped (HTTP %s from %s)\n' "$name" "$status" "$url"
        return
        ;;
    esac
    # A short warm-up fills the connection pool and PostgreSQL's plan and buffer caches.
    wrk -t"$THREADS" -c"$CONNECTIONS" -d2s "$@" "$url" >/dev/null
    out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency "$@" "$url")
    p50=$(printf '%s\n' "$out" | awk '$1 == "50%" {print $2}')
    p99=$(printf '%s\n' "$out" | awk '$1 == "99%" {print $2}')
    rps=$(printf '%s\n' "$out" | awk '/^Requests\/sec/ {print $2}')
    tps=$(printf '%s\n' "$out" | awk '/^Transfer\/sec/ {print $2}')
    errs=$(printf '%s\n' "$out" | awk '/Non-2xx|Socket errors/ {printf "%s ", $0}')
    printf '%-26s HTTP %s  RPS %-9s p50 %-9s p99 %-9s %-10s/s %s\n' "$name" "$status" "$rps" \
        "$p50" "$p99" "$tps" "$errs"
}

echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency, $(nproc) cores"
echo "coach's feed: $(events "$BIG") events, $(curl -s "$BIG" | wc -c) bytes;" \
    "teacher's feed: $(events "$SMALL") events"
run "feed, $SESSIONS sessions" "$BIG"
run "feed, $((SESSIONS / 20)) sessions" "$SMALL"
etag=$(curl -s -D - -o /dev/null "$BIG" | awk 'tolower($1) == "etag:" {print $2}' | tr -d '\r')
run "feed unchanged (304)" "$BIG" -H "If-None-Match: $etag"

secs=$(printf '%s' "$DURATION" | tr -d 's')
printf '%-26s ' "probe, idle"
python3 "$HERE/latency_probe.py" "$COACHD_URL/api/health/live" --rate "$PROBE_RATE" \
    --seconds "$secs"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$((secs + 2))s" "$BIG" >/dev/null &
WRK=$!
printf '%-26s ' "probe, during feed load"
python3 "$HERE/latency_probe.py" "$COACHD_URL/api/health/live" --rate "$PROBE_RATE" \
    --after 1 --seconds "$secs"
wait "$WRK"
