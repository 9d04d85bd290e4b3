#!/usr/bin/env bash
# What the maintenance guard adds to an eviction through kube-apiserver, on the local real
# cluster: `tests/guard-bench.sh [--evictions N]`. Prints p50/p99 of evictions without the
# guard, allowed by it and held by it (429).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/prereqs.sh
ifo_prereqs
ifo_controlplane
cargo build --locked --release -p ifo -p ifo-dev --bin ifo-apiserver --bin ifo-guard-bench
exec "${CARGO_TARGET_DIR:-target}/release/ifo-guard-bench" "$@"
