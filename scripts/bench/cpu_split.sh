#!/usr/bin/env bash
# scripts/bench/cpu_split.sh SECONDS [COMMAND...]: CPU seconds (user + system) that each command
# name used over the next SECONDS, summed over its processes: where a benchmark's cores went
# when the server, the database, Redis and the load generator share one machine. Start the load
# first (a process that starts during the window is not counted). Divide by the requests served
# in the window for the CPU per request of each part.
#
#   scripts/bench/cpu_split.sh 6                      # coachd postgres redis-server wrk
#   scripts/bench/cpu_split.sh 6 coachd node postgres
set -euo pipefail
SECONDS_WINDOW="${1:?usage: cpu_split.sh SECONDS [COMMAND...]}"
shift
NAMES=("$@")
[ ${#NAMES[@]} -gt 0 ] || NAMES=(coachd postgres redis-server wrk)
HZ=$(getconf CLK_TCK)

# "name pid ticks" for every process whose command name is one of NAMES.
snapshot() {
    local comm pid ticks n
    while read -r comm pid; do
        for n in "${NAMES[@]}"; do
            [ "$comm" = "$n" ] || continue
            # Fields after the parenthesised command: utime and stime are the 12th and 13th.
            ticks=$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$pid/stat" 2>/dev/null) || continue
            echo "$comm $pid $ticks"
        done
    done < <(ps -e -o comm=,pid=)
}

BEFORE=$(snapshot)
sleep "$SECONDS_WINDOW"
AFTER=$(snapshot)
awk -v hz="$HZ" -v w="$SECONDS_WINDOW" '
    NR == FNR { t0[$1 " " $2] = $3; next }
    ($1 " " $2) in t0 { used[$1] += $3 - t0[$1 " " $2] }
    END {
        for (c in used) {
            printf "%-14s %7.2f s CPU, %5.1f%% of one core\n", c, used[c] / hz, used[c] / hz / w * 100
            total += used[c]
        }
        printf "%-14s %7.2f s CPU, %5.1f%% of one core\n", "total", total / hz, total / hz / w * 100
    }' <(printf '%s\n' "$BEFORE") <(printf '%s\n' "$AFTER")
