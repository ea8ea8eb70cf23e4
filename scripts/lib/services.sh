# Private PostgreSQL and Redis servers under .local/, for scripts/run, scripts/test and
# scripts/bench. Source scripts/lib/common.sh first. Each server is named by its folder under
# .local/ (pg, test-pg, redis, test-redis, ...); data stays there between runs.
# shellcheck shell=bash

# pg_bin: prints PostgreSQL's bin folder (PG_BIN, else the newest installed version). It is
# looked up when a server starts, not when this file is sourced: on a fresh machine PostgreSQL is
# installed by deps_install after sourcing, and a failing lookup here would end the script silently.
pg_bin() {
    if [ -n "${PG_BIN:-}" ]; then
        printf '%s\n' "$PG_BIN"
        return 0
    fi
    local dir found=""
    for dir in /usr/lib/postgresql/*/bin; do
        [ -x "$dir/pg_ctl" ] && found="$dir"
    done
    [ -n "$found" ] || die "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/pg_ctl); run scripts/lib/deps.sh"
    # The glob sorts 10 before 9; pick the highest version number instead.
    for dir in /usr/lib/postgresql/*/bin; do
        [ -x "$dir/pg_ctl" ] || continue
        if [ "$(printf '%s\n%s\n' "$found" "$dir" | sort -V | tail -n 1)" = "$dir" ]; then found="$dir"; fi
    done
    printf '%s\n' "$found"
}

# ---- PostgreSQL ---------------------------------------------------------------------------

# Runs a command as the owner of the PostgreSQL cluster: initdb and postgres refuse root, so
# root runs them as the `postgres` user.
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

# pg_base NAME: prints the cluster's folder (.local/NAME), creating it. When root and the
# `postgres` user cannot reach the checkout (a parent folder closed to others), the folder
# lives under /var/tmp instead and .local/NAME links to it.
pg_base() {
    local link="$ROOT/.local/$1" alt
    mkdir -p "$ROOT/.local"
    if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$ROOT/.local" 2>/dev/null; then
        alt="/var/tmp/coachd-$(printf '%s' "$ROOT" | sha1sum | cut -c1-12)"
        mkdir -p "$alt/$1"
        chmod 755 "$alt"
        if [ "$(readlink "$link" 2>/dev/null)" != "$alt/$1" ]; then
            rm -rf "$link"
            ln -s "$alt/$1" "$link"
        fi
    fi
    mkdir -p "$link"
    link="$(readlink -f "$link")"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$link"; fi
    printf '%s\n' "$link"
}

pg_running() { # NAME
    local data="$ROOT/.local/$1/data"
    [ -f "$data/postmaster.pid" ] && as_pg "$(pg_bin)/pg_ctl" -D "$(readlink -f "$data")" status >/dev/null 2>&1
}

# pg_start NAME PORT [postgres options...]: initializes the cluster once (trust auth, superuser
# `postgres`), then starts it on 127.0.0.1:PORT unless it already runs there.
pg_start() {
    local name="$1" port="$2"
    shift 2
    local base data sock
    base="$(pg_base "$name")"
    data="$base/data"
    if [ ! -f "$data/PG_VERSION" ]; then
        rm -rf "$data"
        log "postgres: initdb $ROOT/.local/$name/data"
        as_pg "$(pg_bin)/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C >"$base/initdb.log" 2>&1 ||
            { cat "$base/initdb.log" >&2; die "initdb failed"; }
    fi
    if pg_running "$name"; then
        if [ "$(sed -n 4p "$data/postmaster.pid")" = "$port" ]; then return 0; fi
        pg_stop "$name"
    fi
    if port_in_use "$port"; then die "port $port is taken: cannot start PostgreSQL $name there"; fi

    # The unix socket lives inside the cluster folder when its path fits (sun_path is 108 bytes);
    # clients here use TCP on 127.0.0.1 anyway.
    sock="$base/sock"
    if [ "${#sock}" -le 90 ]; then
        mkdir -p "$sock"
        if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$sock"; fi
    else
        sock=""
    fi
    printf '%s\n' "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='$sock' $*" >"$base/start.opts"
    log "postgres: starting $name on 127.0.0.1:$port (log: .local/$name/postgres.log)"
    pg_ctl_start "$name" || die "PostgreSQL $name did not start"
}

# pg_ctl_start NAME: starts the cluster with the options pg_start chose last time.
pg_ctl_start() {
    local base
    base="$(readlink -f "$ROOT/.local/$1")"
    if ! as_pg "$(pg_bin)/pg_ctl" -D "$base/data" -l "$base/postgres.log" -w -t 60 \
        -o "$(cat "$base/start.opts")" start >/dev/null; then
        tail -n 30 "$base/postgres.log" >&2 || true
        return 1
    fi
}

pg_stop() { # NAME
    if pg_running "$1"; then
        as_pg "$(pg_bin)/pg_ctl" -D "$(readlink -f "$ROOT/.local/$1/data")" -m fast -w -t 60 stop >/dev/null
    fi
}

# pg_restart NAME: restarts a running cluster with the options it was started with.
pg_restart() {
    pg_stop "$1"
    pg_ctl_start "$1"
}

# pg_psql PORT DB [psql args...]: psql as the superuser over TCP.
pg_psql() {
    local port="$1" db="$2"
    shift 2
    PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" "$@"
}

pg_url() { printf 'postgresql://postgres@127.0.0.1:%s/%s\n' "$1" "$2"; } # PORT DB

pg_ensure_db() { # PORT DB
    if [ "$(pg_psql "$1" postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$2'")" != 1 ]; then
        pg_psql "$1" postgres -c "CREATE DATABASE \"$2\""
    fi
}

pg_recreate_db() { # PORT DB
    pg_psql "$1" postgres -c "DROP DATABASE IF EXISTS \"$2\" WITH (FORCE)" -c "CREATE DATABASE \"$2\""
}

# ---- Redis --------------------------------------------------------------------------------

redis_pid() { # NAME: prints the pid of a running server started from .local/NAME
    local pidfile="$ROOT/.local/$1/redis.pid" pid
    [ -f "$pidfile" ] || return 1
    pid="$(cat "$pidfile")"
    pid_alive "$pid" || return 1
    printf '%s\n' "$pid"
}

# redis_start NAME PORT: an in-memory Redis on 127.0.0.1:PORT (no snapshots, no AOF).
redis_start() {
    local name="$1" port="$2" dir="$ROOT/.local/$1" i
    mkdir -p "$dir"
    if redis_pid "$name" >/dev/null; then
        if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; then return 0; fi
        redis_stop "$name"
    fi
    if port_in_use "$port"; then die "port $port is taken: cannot start Redis $name there"; fi
    log "redis: starting $name on 127.0.0.1:$port (log: .local/$name/redis.log)"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes \
        --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --save '' --appendonly no \
        --maxclients 20000 >/dev/null
    for ((i = 0; i < 100; i++)); do
        if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; then return 0; fi
        sleep 0.1
    done
    tail -n 30 "$dir/redis.log" >&2 || true
    die "Redis $name did not start"
}

redis_stop() { # NAME
    local pid
    pid="$(redis_pid "$1")" || return 0
    stop_pid "$pid" 10 || true
    rm -f "$ROOT/.local/$1/redis.pid"
}

# ---- Both ---------------------------------------------------------------------------------

# services_up PG_NAME PG_PORT REDIS_NAME REDIS_PORT DB: starts what DATABASE_URL / REDIS_URL do
# not already point at, and exports those two variables.
services_up() {
    local pg_name="$1" pg_port="$2" redis_name="$3" redis_port="$4" db="$5"
    if [ -z "${DATABASE_URL:-}" ]; then
        pg_start "$pg_name" "$pg_port"
        pg_ensure_db "$pg_port" "$db"
        export DATABASE_URL
        DATABASE_URL="$(pg_url "$pg_port" "$db")"
    fi
    if [ -z "${REDIS_URL:-}" ]; then
        redis_start "$redis_name" "$redis_port"
        export REDIS_URL="redis://127.0.0.1:$redis_port/0"
    fi
}

services_down() { # PG_NAME REDIS_NAME
    pg_stop "$1" || true
    redis_stop "$2" || true
}
