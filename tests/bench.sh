#!/usr/bin/env bash
# The end-to-end benchmark on the local real cluster: `tests/bench.sh [ifo-bench flags]`, e.g.
# `tests/bench.sh`, `tests/bench.sh --watchers 200 --rate 10`, `tests/bench.sh --scale`,
# `tests/bench.sh --compare-persist` (the same run with persistence off, then on),
# `tests/bench.sh --pods` (pods on Node objects under the shipped pod rules, and the guard),
# `tests/bench.sh --pods --kwok --jobs 1` (the same on KWOK's nodes, which heartbeat, and pods it
# runs through their lifecycle; kwok is built from its Go module on first use),
# `tests/bench.sh --pods --cold-start 20000,80000,150000` (the server's cold start as the pods grow).
# Prints a table and writes target/ifo-bench.json (see `--help`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/prereqs.sh
ifo_prereqs
ifo_controlplane
cargo build --locked --release -p ifo -p ifo-dev --bin ifo-apiserver --bin ifo-bench
exec "${CARGO_TARGET_DIR:-target}/release/ifo-bench" "$@"
