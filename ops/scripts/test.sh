#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, and runs every test with nextest.
# Tests start their own nats-server on free ports and, as root, real containers.
set -euo pipefail
cd "$(dirname "$0")/../.."
./ops/scripts/setup.sh
# Builds live outside the clone so reruns on this machine are incremental.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/shoal-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
cargo nextest run --workspace --no-fail-fast --profile ci "$@"
