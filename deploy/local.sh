#!/usr/bin/env bash
# Runs the product locally: a real control plane with the server registered, the shipped rules and
# a small VirtualMachine workload, streaming `kubectl get ifos -A -w`. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/prereqs.sh
ifo_prereqs
ifo_controlplane
cargo build --locked --release -p ifo -p ifo-dev --bin ifo-apiserver --bin ifo-dev
exec target/release/ifo-dev "$@"
