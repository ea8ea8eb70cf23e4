#!/usr/bin/env bash
# scripts/bench/chat_post_ceiling.sh: the database's own ceiling for S5 (POST chat message, every
# post in one mentorship): pgbench runs coachd's batch statement (SQL_CHAT_POST_BATCH, read from
# db/queries/chat.sql, so it is the statement coachd sends) with BATCH posts per execution, over
# CLIENTS connections (2: coachd keeps at most two batches of a mentorship in flight), each
# execution its own transaction and commit, as in coachd. The ceiling in posts/s is
# executions/s × BATCH. The access read that coachd runs before posts join a batch (one
# chat_post_load_many per mentorship and loop turn) is left out (it does not hold the
# mentorship's clock row); LOAD=1 adds one, of BATCH posts, before each batch.
#
#   DATABASE_URL=... MENTORSHIP=uuid SENDER=user-id scripts/bench/chat_post_ceiling.sh
#   BATCH (16), CLIENTS (2), DURATION (10 s), LOAD (0), CHAT_SQL (db/queries/chat.sql)
# It writes real messages into that mentorship (a scratch or bench database only).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${DATABASE_URL:?set DATABASE_URL}" "${MENTORSHIP:?set MENTORSHIP}" "${SENDER:?set SENDER}"
BATCH="${BATCH:-16}"
CLIENTS="${CLIENTS:-2}"
SQL_FILE="${CHAT_SQL:-$ROOT/db/queries/chat.sql}" # another version of the statements, to compare
DURATION="${DURATION:-10}"
command -v pgbench >/dev/null || { echo "pgbench missing (postgresql-client)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The statement between "-- name: chat_post_batch" and the next name, comments dropped; its
# array parameters become arrays built per execution (fresh ids and bodies each time).
awk '/^-- name: chat_post_batch/ {on = 1; next} on && /^-- name:/ {exit} on && !/^--/ {print}' \
    "$SQL_FILE" |
    sed -e 's/\$1::uuid/:m::uuid/g' -e 's/\$2::int/:n::int/g' \
        -e 's/\$3::uuid\[\]/(SELECT array_agg(gen_random_uuid()) FROM generate_series(1, :n))/' \
        -e 's/\$4::text\[\]/array_fill(:s::text, ARRAY[:n::int])/' \
        -e "s/\\\$5::text\\[\\]/(SELECT array_agg('ceiling post ' || random()::text) FROM generate_series(1, :n))/" \
        -e 's/\$6::uuid\[\]/array_fill(NULL::uuid, ARRAY[:n::int])/' \
        -e 's/\$7::uuid\[\]/array_fill(NULL::uuid, ARRAY[:n::int])/' \
        -e "s/\\\$8::text\\[\\]/array_fill('Ceiling'::text, ARRAY[:n::int])/" >"$WORK/batch.sql"
grep -q '\$[0-9]' "$WORK/batch.sql" && { echo "unreplaced parameter in the batch statement" >&2; exit 1; }
tr '\n' ' ' <"$WORK/batch.sql" | sed 's/;[[:space:]]*$//' >"$WORK/one.sql"
echo ";" >>"$WORK/one.sql"

if [ "${LOAD:-0}" = 1 ]; then
    # The grouped access read of the batch's posts (chat_post_load_many), its own statement.
    awk '/^-- name: chat_post_load_many/ {on = 1; next} on && /^-- name:/ {exit} on && !/^--/ {print}' \
        "$SQL_FILE" |
        sed -e 's/\$1::uuid/:m::uuid/g' -e 's/\$2::text\[\]/array_fill(:s::text, ARRAY[:n::int])/' \
            -e 's/\$3::uuid\[\]/array_fill(NULL::uuid, ARRAY[:n::int])/' \
            -e 's/\$4::uuid\[\]/array_fill(NULL::uuid, ARRAY[:n::int])/' |
        tr '\n' ' ' | sed 's/;[[:space:]]*$//' >"$WORK/load.sql"
    echo ";" >>"$WORK/load.sql"
    grep -q '\$[0-9]' "$WORK/load.sql" && { echo "unreplaced parameter in the access read" >&2; exit 1; }
    cat "$WORK/load.sql" "$WORK/one.sql" >"$WORK/script.sql"
else
    cp "$WORK/one.sql" "$WORK/script.sql"
fi

out=$(pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" -D m="$MENTORSHIP" \
    -D s="$SENDER" -D n="$BATCH" -f "$WORK/script.sql" "$DATABASE_URL" 2>&1) || { echo "$out" >&2; exit 1; }
tps=$(printf '%s\n' "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -n 1)
lat=$(printf '%s\n' "$out" | sed -n 's/^latency average = \([0-9.]*\) ms/\1/p')
posts=$(awk -v t="$tps" -v b="$BATCH" 'BEGIN {printf "%.0f", t * b}')
echo "RESULT chat post ceiling: batch $BATCH, $CLIENTS clients, load ${LOAD:-0}: $tps statements/s, latency ${lat} ms, $posts posts/s"
