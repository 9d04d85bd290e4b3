#!/usr/bin/env bash
# What the maintenance guard adds to an eviction through kube-apiserver, on the local real
# cluster: `tests/guard-bench.sh [--evictions N]`. Prints p50/p99 of evictions without the
# guard, allowed by it and held by it (429).
#
# `tests/guard-bench.sh --under-attack [N]`: the guard's time for kube-apiserver's reviews while
# it is attacked. Runs every attack of the hostile-neighbour tests (`tests/certificates.rs`: the
# default setup, the doors' key; `tests/managed.rs`: the unproven one), built for release, one
# at a time, each with N evictions of a held node's pod (100 if not given), and
# prints, per setup and attack, how many reviews kube-apiserver sent to the standby door and the
# bound of the histogram bucket their p99 falls in (`ifo_admission_review_duration_seconds`:
# from a review's arrival to its answer). The attackers' own threads run at niceness 19, as
# their work would run on other nodes; what the server does for them is not lowered. Run it on
# an otherwise idle machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/prereqs.sh
ifo_prereqs
ifo_controlplane
if [[ "${1:-}" == "--under-attack" ]]; then
  evictions="${2:-100}"
  [[ "$evictions" =~ ^[1-9][0-9]*$ ]] || {
    echo "guard-bench.sh --under-attack N: N is a number of evictions, not '$evictions'" >&2
    exit 2
  }
  log="$(mktemp)"
  trap 'rm -f "$log"' EXIT
  status=0
  # --release: the tests run the server cargo builds for them, the release build here.
  IFO_ATTACK_EVICTIONS="$evictions" IFO_ATTACKER_NICENESS=19 \
    cargo test --locked --release -p ifo --test certificates --test managed -- \
    --test-threads=1 --nocapture _open padded probes >"$log" 2>&1 || status=$?
  awk '
    /Running tests\/certificates.rs/ { setup = "default (doors key)" }
    /Running tests\/managed.rs/ { setup = "unproven" }
    match($0, /^test [a-z0-9_]+ \.\.\./) { attack = substr($0, 6, RLENGTH - 9) }
    /reviews at the standby door during the attack:/ {
      sub(/.*during the attack: /, "")
      printf "%-20s %-75s %s\n", setup, attack, $0
    }
  ' "$log"
  if [[ $status -ne 0 ]]; then
    echo "the attacks failed (a test did not pass): see below" >&2
    tail -50 "$log" >&2
  fi
  exit $status
fi
cargo build --locked --release -p ifo -p ifo-dev --bin ifo-apiserver --bin ifo-guard-bench
exec "${CARGO_TARGET_DIR:-target}/release/ifo-guard-bench" "$@"
