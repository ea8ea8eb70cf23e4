#!/usr/bin/env bash
# scripts/bench/chat_post_ceiling.sh: the database's own ceiling for chat posts: pgbench runs
# coachd's insert statement (chat_post_insert, read from db/queries/chat.sql, so it is the
# statement coachd sends) with BATCH posts per execution over CLIENTS connections (2: coachd keeps
# at most two inserts in flight), each execution its own transaction and commit, as in coachd.
# The ceiling in posts/s is executions/s x BATCH.
#
#   S5, every post in one mentorship (its coach posts):
#     DATABASE_URL=... MENTORSHIP=uuid scripts/bench/chat_post_ceiling.sh
#   S7, each post in another mentorship (each by its coach), BATCH of the active mentorships
#   from a random offset on:
#     DATABASE_URL=... SPREAD=1 scripts/bench/chat_post_ceiling.sh
#   BATCH (32), CLIENTS (2), DURATION (10 s), LOAD (0: 1 adds the access read, chat_post_load, of
#   the same posts before each insert, as coachd reads them first), CHAT_SQL (db/queries/chat.sql)
# It writes real messages (a scratch or bench database only) and, for SPREAD, a table
# bench_chat_pairs (the active mentorships and their coaches, numbered).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${DATABASE_URL:?set DATABASE_URL}"
BATCH="${BATCH:-32}"
CLIENTS="${CLIENTS:-2}"
SQL_FILE="${CHAT_SQL:-$ROOT/db/queries/chat.sql}" # another version of the statements, to compare
DURATION="${DURATION:-10}"
command -v pgbench >/dev/null || { echo "pgbench missing (postgresql-client)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Which posts: the pairs (mentorship, coach) numbered 0..total-1; one execution takes BATCH of
# them from offset :k (SPREAD) or BATCH times the one mentorship.
psql -X -q -v ON_ERROR_STOP=1 -d "$DATABASE_URL" <<'SQL'
DROP TABLE IF EXISTS bench_chat_pairs;
CREATE TABLE bench_chat_pairs AS
    SELECT (row_number() OVER (ORDER BY id) - 1)::int AS i, id AS mentorship, coach_id AS sender
    FROM mentorships WHERE status = 'active';
SQL
if [ "${SPREAD:-0}" = 1 ]; then
    total=$(psql -X -tAq -d "$DATABASE_URL" -c "SELECT count(*) FROM bench_chat_pairs")
    [ "$total" -ge "$BATCH" ] || { echo "$total active mentorships, fewer than BATCH" >&2; exit 1; }
    PICK="FROM generate_series(0, :n - 1) g JOIN bench_chat_pairs p ON p.i = (g + :k) % $total"
    ORDER="ORDER BY g"
else
    : "${MENTORSHIP:?set MENTORSHIP (or SPREAD=1)}"
    # Otherwise the arrays would be NULL and the ceiling that of empty statements.
    found=$(echo "SELECT count(*) FROM bench_chat_pairs WHERE mentorship::text = :'m'" |
        psql -X -tAq -v ON_ERROR_STOP=1 -v m="$MENTORSHIP" -d "$DATABASE_URL") || exit 1
    [ "$found" = 1 ] || { echo "MENTORSHIP $MENTORSHIP is not an active mentorship" >&2; exit 1; }
    total=1
    PICK="FROM generate_series(0, :n - 1) g JOIN bench_chat_pairs p ON p.mentorship = '$MENTORSHIP'"
    ORDER="ORDER BY g"
fi
ARR_M="(SELECT array_agg(p.mentorship $ORDER) $PICK)"
ARR_S="(SELECT array_agg(p.sender $ORDER) $PICK)"

# One statement of the file, comments dropped, on one line; its parameters replaced by arrays
# built per execution (fresh ids and bodies each time).
statement() {
    awk -v name="$1" '$0 == "-- name: " name {on = 1; next} on && /^-- name:/ {exit}
                      on && !/^--/ {print}' "$SQL_FILE" | tr '\n' ' ' | sed 's/;[[:space:]]*$//'
    echo ";"
}
statement chat_post_insert |
    sed -e "s/\\\$1::uuid\\[\\]/(SELECT array_agg(gen_random_uuid()) FROM generate_series(1, :n))/" \
        -e "s/\\\$2::uuid\\[\\]/$ARR_M/" -e "s/\\\$3::text\\[\\]/$ARR_S/" \
        -e "s/\\\$4::text\\[\\]/(SELECT array_agg('ceiling post ' || random()::text) FROM generate_series(1, :n))/" \
        -e 's/\$5::uuid\[\]/array_fill(NULL::uuid, ARRAY[:n::int])/' \
        -e 's/\$6::uuid\[\]/array_fill(NULL::uuid, ARRAY[:n::int])/' \
        -e "s/\\\$7::text\\[\\]/array_fill('{}'::text, ARRAY[:n::int])/" \
        -e "s/\\\$8::text\\[\\]/array_fill('Ceiling'::text, ARRAY[:n::int])/" >"$WORK/insert.sql"
grep -q '\$[0-9]' "$WORK/insert.sql" && { echo "unreplaced parameter in the insert" >&2; exit 1; }
echo "\\set k random(0, $((total - 1)))" >"$WORK/script.sql"
if [ "${LOAD:-0}" = 1 ]; then
    statement chat_post_load |
        sed -e "s/\\\$1::uuid\\[\\]/$ARR_M/" -e "s/\\\$2::text\\[\\]/$ARR_S/" \
            -e 's/\$3::uuid\[\]/array_fill(NULL::uuid, ARRAY[:n::int])/' \
            -e 's/\$4::uuid\[\]/array_fill(NULL::uuid, ARRAY[:n::int])/' \
            -e "s/\\\$5::text\\[\\]/array_fill('{}'::text, ARRAY[:n::int])/" >"$WORK/load.sql"
    grep -q '\$[0-9]' "$WORK/load.sql" && { echo "unreplaced parameter in the access read" >&2; exit 1; }
    cat "$WORK/load.sql" >>"$WORK/script.sql"
fi
cat "$WORK/insert.sql" >>"$WORK/script.sql"

out=$(pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" -D n="$BATCH" \
    -f "$WORK/script.sql" "$DATABASE_URL" 2>&1) || { echo "$out" >&2; exit 1; }
tps=$(printf '%s\n' "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -n 1)
lat=$(printf '%s\n' "$out" | sed -n 's/^latency average = \([0-9.]*\) ms/\1/p')
posts=$(awk -v t="$tps" -v b="$BATCH" 'BEGIN {printf "%.0f", t * b}')
echo "RESULT chat post ceiling: $([ "${SPREAD:-0}" = 1 ] && echo "spread over $total" || echo "one") mentorship(s), batch $BATCH, $CLIENTS clients, load ${LOAD:-0}: $tps statements/s, latency ${lat} ms, $posts posts/s"
