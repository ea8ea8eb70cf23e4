#!/bin/sh
# Member-list and user-search benchmark (issue requirement: p99 under 20 ms with 64 connections
# on an organization of 10,000 members).
#
# Seeds one organization with 10,000 members and an OrganizationAdmin session of known token
# (scripts/bench/seed_members.sql), then runs wrk against a running coachd:
#   1. GET /api/organizations/:id/users?limit=100
#   2. GET /api/organizations/:id/users?limit=100&search=lovelace   (200 matches)
#   3. GET /api/users?limit=100&search=lovelace                      (when the route exists)
# plus GET /api/users/me as the floor (session guard only) for comparison.
# and prints p50 / p99 / requests per second of each.
#
# Environment:
#   COACHD_URL     base URL of the running coachd (required), e.g. http://127.0.0.1:8080
#   DATABASE_URL   its database (required; the seed writes there)
#   BENCH_ORG      organization id to seed / reuse (default: a fixed UUID)
#   BENCH_TOKEN    session token of the admin (default: a fixed 43-character token)
#   BENCH_MEMBERS  members to seed (default 10000)
#   DURATION, CONNECTIONS, THREADS   wrk settings (default 15s, 64, 2)
#   SEARCH         search term (default lovelace)
# Run coachd from a release build with LOG_LEVEL=warn (see docs/performance.md).
set -eu

: "${COACHD_URL:?set COACHD_URL to the running coachd}"
: "${DATABASE_URL:?set DATABASE_URL to its database}"
ORG=${BENCH_ORG:-0b0e5c8a-6d1f-4e2a-9c3b-7a5d4e3f2a10}
TOKEN=${BENCH_TOKEN:-benchMembersSessionToken0123456789abcdefghi}
MEMBERS=${BENCH_MEMBERS:-10000}
DURATION=${DURATION:-15s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
SEARCH=${SEARCH:-lovelace}
HERE=$(dirname "$0")

psql -X -q "$DATABASE_URL" -v org="$ORG" -v token="$TOKEN" -v members="$MEMBERS" \
    -f "$HERE/seed_members.sql"

COOKIE="Cookie: auth.session_token=$TOKEN"
ORGH="X-Organization-Id: $ORG"

run() {
    name=$1
    url=$2
    status=$(curl -s -o /dev/null -w '%{http_code}' -H "$COOKIE" -H "$ORGH" "$url")
    if [ "$status" != 200 ]; then
        printf '%-28s skipped (HTTP %s from %s)\n' "$name" "$status" "$url"
        return
    fi
    # A short warm-up fills the connection pool and PostgreSQL's plan and buffer caches.
    wrk -t"$THREADS" -c"$CONNECTIONS" -d3s -H "$COOKIE" -H "$ORGH" "$url" >/dev/null
    out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -H "$COOKIE" -H "$ORGH" "$url")
    p50=$(printf '%s\n' "$out" | awk '$1 == "50%" {print $2}')
    p99=$(printf '%s\n' "$out" | awk '$1 == "99%" {print $2}')
    rps=$(printf '%s\n' "$out" | awk '/^Requests\/sec/ {print $2}')
    errs=$(printf '%s\n' "$out" | awk '/Non-2xx|Socket errors/ {printf "%s ", $0}')
    printf '%-28s p50 %-9s p99 %-9s RPS %-10s %s\n' "$name" "$p50" "$p99" "$rps" "$errs"
}

echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency, $MEMBERS members, $(nproc) cores"
# The floor: a route that runs only the session guard (one query) and no statement of its own.
run "floor: users/me" "$COACHD_URL/api/users/me"
run "members?limit=100" "$COACHD_URL/api/organizations/$ORG/users?limit=100"
run "members?search=$SEARCH" "$COACHD_URL/api/organizations/$ORG/users?limit=100&search=$SEARCH"
run "users?search=$SEARCH" "$COACHD_URL/api/users?limit=100&search=$SEARCH"
