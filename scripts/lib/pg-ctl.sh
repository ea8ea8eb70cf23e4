#!/usr/bin/env bash
# pg-ctl.sh NAME start|stop|restart|status: controls the private PostgreSQL cluster in
# .local/NAME (as started by scripts/run or scripts/test) with the options it was started with.
# API tests use it through COACHD_TEST_PG_RESTART to break and mend the database connection.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
. "$ROOT/scripts/lib/services.sh"

name="${1:?usage: pg-ctl.sh NAME start|stop|restart|status}"
action="${2:-restart}"
data="$(readlink -f "$ROOT/.local/$name/data")"
[ -f "$data/PG_VERSION" ] || die "no cluster in .local/$name"

case "$action" in
    restart) pg_restart "$name" ;;
    stop) pg_stop "$name" ;;
    start) pg_running "$name" || pg_ctl_start "$name" ;;
    status) pg_running "$name" ;;
    *) die "unknown action: $action" ;;
esac
