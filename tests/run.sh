#!/usr/bin/env bash
# Runs every test: unit tests, the rules library's cases, the end-to-end tests against a real
# kube-apiserver + etcd built from the pinned Kubernetes release, and the install on a real node
# (kubelet, kube-proxy, kube-scheduler from the same release; containerd, runc and the CNI
# plugins from Debian's packages). Everything is built or installed on the first run and cached.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/prereqs.sh
ifo_prereqs

# The control plane with the node's pieces, promtool and Prometheus, and the browser first, so
# their build output is not mixed into test output.
ifo_node
ifo_promtool
ifo_browser

cargo build --locked --workspace --all-targets
cargo test --locked --workspace -- --test-threads=4
