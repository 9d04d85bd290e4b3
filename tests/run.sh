#!/usr/bin/env bash
# Runs every test: unit tests, the rules library's cases, and the end-to-end tests against a real
# kube-apiserver + etcd built from the pinned Kubernetes release (cached after the first run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/prereqs.sh
ifo_prereqs

# The control plane and promtool first, so their build output is not mixed into test output.
ifo_controlplane
ifo_promtool

cargo build --locked --workspace --all-targets
cargo test --locked --workspace -- --test-threads=4
