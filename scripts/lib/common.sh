# Shared helpers for the scripts in scripts/. Source it; it defines functions and ROOT only.
# shellcheck shell=bash

# Repository root: the folder above scripts/.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export COACHD_ROOT="$ROOT"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Never a silent exit: under `set -e` a failing command ends the script, and this trap names the
# command, its file and line, and its status first. errtrace carries the trap into functions.
on_err() {
    local rc=$? i
    [[ $- == *e* ]] || return 0 # cleanup code that runs with `set +e` expects failures
    log "error: '$BASH_COMMAND' failed with status $rc at ${BASH_SOURCE[1]:-?}:${BASH_LINENO[0]:-?}"
    for ((i = 1; i < ${#FUNCNAME[@]} - 1; i++)); do
        log "  called from ${FUNCNAME[$i]} (${BASH_SOURCE[$((i + 1))]:-?}:${BASH_LINENO[$i]:-?})"
    done
}
set -E
trap on_err ERR

# The Python that has Debian's python3-pytest and python3-requests, whatever else is on PATH.
PYTHON=/usr/bin/python3

# Raises the open-file limit as far as allowed (a server holds one descriptor per connection).
raise_nofile() {
    local want=200000 hard
    ulimit -n "$want" 2>/dev/null && return 0
    hard="$(ulimit -Hn)"
    if [ "$hard" = unlimited ] || [ "$hard" -gt "$want" ]; then hard=$want; fi
    ulimit -n "$hard" 2>/dev/null || true
}

# meson_build DIR [meson options...]: configures DIR once (or applies changed options), then builds.
meson_build() {
    local dir="$1"
    shift
    if [ -f "$ROOT/$dir/build.ninja" ]; then
        if [ "$#" -gt 0 ]; then meson configure "$ROOT/$dir" "$@" >/dev/null || return 1; fi
    else
        # A folder left by a setup that failed part-way is set up again from scratch.
        rm -rf "${ROOT:?}/$dir"
        meson setup "$ROOT/$dir" "$ROOT" "$@" || return 1
    fi
    ninja -C "$ROOT/$dir"
}

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# port_in_use PORT: true when something accepts connections on 127.0.0.1:PORT.
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# wait_http URL SECONDS [PID] [curl args...]: waits until URL answers with any HTTP status.
# Fails early when PID (if not empty) has exited.
wait_http() {
    local url="$1" secs="$2" pid="${3:-}"
    shift 3 || shift "$#"
    local deadline=$((SECONDS + secs))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
        if curl -s -o /dev/null --max-time 2 "$@" "$url"; then return 0; fi
        sleep 0.2
    done
    return 1
}

# pid_alive PID: true while PID runs (a zombie that nobody reaped yet counts as gone).
pid_alive() {
    local state
    kill -0 "$1" 2>/dev/null || return 1
    state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
    [ "$state" != Z ]
}

# stop_pid PID SECONDS: SIGTERM, waits up to SECONDS, then SIGKILL. Returns 0 when PID
# was gone or exited within time, 1 when it had to be killed.
stop_pid() {
    local pid="$1" secs="$2" i
    pid_alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < secs * 10; i++)); do
        pid_alive "$pid" || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    return 1
}

# reference_install: installs the API reference's renderer (docs/reference/package.json, exactly
# as its package-lock.json pins it, integrity hashes checked) when it is missing or older than
# the lock; the build embeds it (routes/embed_bundle.py). No install scripts run and React and
# the other peers are left out: only the prebuilt bundles/redoc.standalone.js is used, which
# carries them. Without npm it says so and returns 0: the build then serves a page without it.
reference_install() {
    local dir="$ROOT/docs/reference"
    if [ -f "$dir/node_modules/redoc/bundles/redoc.standalone.js" ] &&
        [ ! "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
        return 0
    fi
    if ! command -v npm >/dev/null 2>&1; then
        log "npm not found: building without the API reference's renderer (docs/reference)"
        return 0
    fi
    log "npm ci (docs/reference)"
    (cd "$dir" && npm ci --ignore-scripts --omit=peer --no-audit --no-fund --loglevel=error)
}
