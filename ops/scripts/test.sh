#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, and runs every test with nextest.
# Tests start their own nats-server on free ports and, as root, real containers.
set -euo pipefail
cd "$(dirname "$0")/../.."
./ops/scripts/setup.sh
# Builds live outside the clone so reruns on this machine are incremental.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/shoal-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Every process the suite starts inherits this marker, so leftovers.sh can tell them apart
# from anything else running on the machine.
export SHOAL_TEST_RUN="suite-$$-$(date +%s%N)"
status=0
cargo nextest run --workspace --no-fail-fast --profile ci "$@" || status=$?
# A test must never leave a server or a cluster running, even when it failed or timed out.
./ops/scripts/leftovers.sh "$SHOAL_TEST_RUN" || status=1
exit "$status"
