#!/usr/bin/env bash
# Fails (and lists them) if processes the test suite started are still running after it:
# nats-server, shoal, shoal-loadtest or shoal-shim (a pod's monitor or pause process)
# processes whose environment carries the suite's marker SHOAL_TEST_RUN=$1 (test.sh exports
# it, and every child inherits it). Processes of other runs on the same machine carry another
# marker, or none, and are left out. Once listed they are killed, so that one failed run does
# not hold ports and stores on the machine for the next.
#
# A container does not carry the marker (its environment is its pod's), but its monitor does:
# the containers that leftover monitors and pause processes parent are killed with them, and
# their then empty cgroups removed. Killing only the monitor would orphan its container to
# pid 1 for good, in a cgroup nothing removes (what a test killed at its timeout left behind:
# its Drop guards never ran).
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

# The live children of the given pids (a monitor's container init, a pause process's).
children_of() {
    local dir ppid state
    for dir in /proc/[0-9]*; do
        # Fields after the command (which may hold spaces): state, ppid.
        read -r state ppid _ < <(sed 's/.*) //' "$dir/stat" 2>/dev/null) || continue
        [[ "$state" == Z ]] && continue
        for pid in "$@"; do
            if [[ "$ppid" == "$pid" ]]; then
                echo "${dir#/proc/}"
                break
            fi
        done
    done
}

# The cgroup directories (every hierarchy) of the given pids that a Shoal runtime made:
# paths whose first component starts with `shoal`.
shoal_cgroups_of() {
    local pid path mount
    for pid in "$@"; do
        while IFS=: read -r _ _ path; do
            [[ "$path" == /shoal* ]] || continue
            for mount in /sys/fs/cgroup /sys/fs/cgroup/*; do
                [[ -d "$mount$path" ]] && echo "$mount$path"
            done
        done <"/proc/$pid/cgroup" 2>/dev/null || true
    done | sort -u
}

# Removes the given cgroup directories and their ancestors up to the hierarchy's top-level
# `shoal…` directory, each only once it is empty (rmdir refuses otherwise): a live pod of
# another run in the same parent keeps the parent.
remove_cgroups() {
    local dir
    for dir in "$@"; do
        while [[ "$(basename "$dir")" != cgroup && -d "$dir" ]]; do
            [[ "$dir" == /sys/fs/cgroup/* ]] || break
            rmdir "$dir" 2>/dev/null || break
            dir=$(dirname "$dir")
            # Stop at the mount point of the hierarchy.
            mountpoint -q "$dir" && break
        done
    done
}

# Children told to stop when their test ended may need a moment to exit.
for _ in $(seq 1 50); do
    [[ -z "$(leftovers)" ]] && exit 0
    sleep 0.2
done
echo "error: processes started by the test suite are still running after it:" >&2
left=$(leftovers)
# shellcheck disable=SC2086 # pid lists
containers=$(children_of $left | sort -u | grep -vxF -f <(echo "$left") || true)
for pid in $left $containers; do
    ps -o pid=,ppid=,etime=,args= -p "$pid" >&2 || true
done
# shellcheck disable=SC2086
cgroups=$(shoal_cgroups_of $containers)
for pid in $containers $left; do
    kill -KILL "$pid" 2>/dev/null || true
done
if [[ -n "$cgroups" ]]; then
    # A container's init is its pid namespace's pid 1: its death takes the rest of the
    # namespace along, but the kernel needs a moment before the cgroups are empty.
    for _ in $(seq 1 50); do
        # shellcheck disable=SC2086
        remove_cgroups $cgroups
        remaining=$(for d in $cgroups; do [[ -d "$d" ]] && echo "$d"; done)
        [[ -z "$remaining" ]] && break
        sleep 0.2
    done
    for d in $cgroups; do
        [[ -d "$d" ]] && echo "leftovers: could not remove cgroup $d" >&2
    done
fi
exit 1
