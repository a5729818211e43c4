#!/usr/bin/env bash
# Fails (and lists them) if processes the test suite started are still running after it:
# nats-server, shoal, shoal-loadtest or shoal-shim (a pod's monitor or pause process)
# processes whose environment carries the suite's marker SHOAL_TEST_RUN=$1 (test.sh exports
# it, and every child inherits it). Processes of other runs on the same machine carry another
# marker, or none, and are left out. Once listed they are killed, so that one failed run does
# not hold ports and stores on the machine for the next.
# Usage: leftovers.sh MARKER
set -euo pipefail
marker="SHOAL_TEST_RUN=${1:?usage: leftovers.sh MARKER}"

leftovers() {
    local dir pid comm
    for dir in /proc/[0-9]*; do
        pid=${dir#/proc/}
        { read -r comm <"$dir/comm"; } 2>/dev/null || continue
        case "$comm" in
            nats-server|shoal|shoal-loadtest|shoal-shim) ;;
            *) continue ;;
        esac
        # A zombie has exited: it holds no port and no files.
        [[ "$(awk '{print $3}' "$dir/stat" 2>/dev/null)" == Z ]] && continue
        if tr '\0' '\n' <"$dir/environ" 2>/dev/null | grep -qxF "$marker"; then
            echo "$pid"
        fi
    done
}

# Children told to stop when their test ended may need a moment to exit.
for _ in $(seq 1 50); do
    [[ -z "$(leftovers)" ]] && exit 0
    sleep 0.2
done
echo "error: processes started by the test suite are still running after it:" >&2
left=$(leftovers)
for pid in $left; do
    ps -o pid=,ppid=,etime=,args= -p "$pid" >&2 || true
done
for pid in $left; do
    kill -KILL "$pid" 2>/dev/null || true
done
exit 1
