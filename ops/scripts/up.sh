#!/usr/bin/env bash
# Sets up this machine and runs a one-machine Shoal cluster in the foreground with the demo
# application applied. Ctrl-C stops it; state is kept in the data dir for the next start.
set -euo pipefail
cd "$(dirname "$0")/../.."
./ops/scripts/setup.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/shoal-target}"
# A debug build: it shares the test suite's build and starts in minutes on a cold machine;
# the benchmarks in loadtest/ use release builds.
cargo build -p shoal-cli -p shoal-node
SHOAL="$CARGO_TARGET_DIR/debug/shoal"
PORT="${SHOAL_PORT:-4222}"
export SHOAL_NATS="nats://127.0.0.1:$PORT"
# The CLI finds the admin credential (and a TLS bus's CA) by itself only in the default data
# dir; for another one, this script's own commands and the ones it suggests need them named.
DATA_DIR="" previous=""
for arg in "$@"; do
  case "$arg" in --data-dir=*) DATA_DIR="${arg#--data-dir=}" ;; esac
  [ "$previous" = "--data-dir" ] && DATA_DIR="$arg"
  previous="$arg"
done
if [ -n "$DATA_DIR" ]; then
  DATA_DIR="$(realpath -m "$DATA_DIR")"
  export SHOAL_CREDS="${SHOAL_CREDS:-$DATA_DIR/auth/creds/admin.nk}"
  case " $* " in *" --tls "*) export SHOAL_CA="${SHOAL_CA:-$DATA_DIR/auth/tls/ca.pem}" ;; esac
fi

"$SHOAL" up --port "$PORT" "$@" &
UP=$!
trap 'kill -INT $UP 2>/dev/null; wait $UP' INT TERM EXIT
for _ in $(seq 1 100); do
  "$SHOAL" get ns >/dev/null 2>&1 && break
  kill -0 "$UP" 2>/dev/null || { echo "shoal up exited early" >&2; exit 1; }
  sleep 0.2
done
"$SHOAL" image build-busybox
"$SHOAL" apply -f ops/demo/
echo
echo "Demo applied: a Deployment of 3 busybox httpd pods and a Service. In another terminal:"
echo "  export SHOAL_NATS=$SHOAL_NATS"
[ -n "${SHOAL_CREDS:-}" ] && echo "  export SHOAL_CREDS=$SHOAL_CREDS"
[ -n "${SHOAL_CA:-}" ] && echo "  export SHOAL_CA=$SHOAL_CA"
echo "  $SHOAL get deploy,rs,po,svc -o wide"
wait $UP
