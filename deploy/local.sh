#!/usr/bin/env bash
# Runs the product locally: a real control plane with the server registered, the shipped rules and
# a small VirtualMachine workload, streaming `kubectl get ifos -A -w --output-watch-events -o wide`
# (each row labelled ADDED, MODIFIED or DELETED). Demo setting: a 5s debounce grace instead of
# 30s, so operations are seen to end and complete. Ctrl-C stops everything.
#
#   deploy/local.sh            # the server runs on this machine, registered as the APIService
#   deploy/local.sh --node     # a real node (root): the image, `kubectl apply -k deploy/`, two replicas
#   deploy/local.sh --guard    # with the maintenance guard: `kubectl drain node-1` waits while it is busy
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/prereqs.sh
ifo_prereqs
if [[ " $* " == *" --node "* ]]; then
  ifo_node
else
  ifo_controlplane
fi
cargo build --locked --release -p ifo -p ifo-dev --bin ifo-apiserver --bin ifo-dev
# The plugin too: ifo-dev prints the `kubectl-ifo ui -A` line that opens the timeline.
cargo build --locked --release -p kubectl-ifo --bin kubectl-ifo
exec target/release/ifo-dev "$@"
