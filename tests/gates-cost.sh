#!/usr/bin/env bash
# What keeping the maintenance gates costs the index, counted rather than timed:
# `tests/gates-cost.sh [--changes N]`.
#
# Builds `benches/index_cost.rs` twice, as it is and with the gates' update compiled out
# (`--cfg bench_no_gates`, in its own target directory: the first build takes minutes), runs each
# workload of both under callgrind, counting only the changes applied, and prints per change the
# instructions and the cycles estimated from the simulated cache misses, with and without the
# gates. Counts of one binary on one input vary by a few hundredths of a percent from run to run
# (hash seeds); timings on a shared machine spread by more than the difference measured.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/prereqs.sh

changes=20000
while [[ $# -gt 0 ]]; do
  case $1 in
    --changes) changes=${2:?--changes takes a number}; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $changes =~ ^[1-9][0-9]*$ ]] || { echo "error: --changes takes a positive number, not $changes" >&2; exit 2; }

command -v valgrind >/dev/null 2>&1 || ifo_apt_install valgrind
command -v jq >/dev/null 2>&1 || ifo_apt_install jq
for tool in valgrind jq; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: $tool is missing (Debian: apt-get install $tool)" >&2
    exit 1
  fi
done

target=${CARGO_TARGET_DIR:-target}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The benchmark's binary, built into target directory $1 with the extra rustc flags $2.
build() {
  echo "== building benches/index_cost.rs in $1${2:+ ($2)}" >&2
  CARGO_TARGET_DIR=$1 RUSTFLAGS=$2 cargo bench --locked -p ifo --bench index_cost --no-run \
    --message-format=json-render-diagnostics |
    jq -r 'select(.reason == "compiler-artifact" and .target.name == "index_cost") | .executable // empty'
}

# "instructions estimated-cycles" per change of workload $2 (counted in function $3) of binary $1.
count() {
  local out
  out=$(mktemp "$work/callgrind.XXXXXX")
  if ! valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$out" \
    --toggle-collect="index_cost::$3" "$1" "$2" --changes "$changes" >"$work/stdout" 2>"$work/stderr"; then
    cat "$work/stderr" >&2
    echo "error: callgrind failed on $1 $2" >&2
    exit 1
  fi
  # Cycles as kcachegrind estimates them: an instruction each, 10 per first-level miss, 100 per
  # last-level miss.
  awk -v n="$changes" '
    /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i }
    /^totals:/ {
      ir = $col["Ir"]
      l1 = $col["I1mr"] + $col["D1mr"] + $col["D1mw"]
      ll = $col["ILmr"] + $col["DLmr"] + $col["DLmw"]
      printf "%.0f %.0f\n", ir / n, (ir + 10 * l1 + 100 * ll) / n
    }' "$out"
}

kept=$(build "$target" "${RUSTFLAGS:-}")
off=$(build "$target/no-gates" "${RUSTFLAGS:+$RUSTFLAGS }--cfg bench_no_gates")
[[ -x $kept && -x $off ]] || { echo "error: the benchmark's binaries were not built" >&2; exit 1; }

# One line of the table: the label, the measure, the two counts and the increase.
row() {
  printf '%-36s %-14s %12s %12s %+8.1f%%\n' "$1" "$2" "$3" "$4" \
    "$(awk -v a="$3" -v b="$4" 'BEGIN { print (b - a) * 100 / a }')"
}

printf '\nWhat the maintenance gates cost the index, per change (an operation starting, then ending:\n'
printf 'per operation): 10,000 records held, 500 watchers, %s changes of each workload counted by\n' "$changes"
printf 'callgrind; cycles estimated from the simulated cache misses.\n\n'
printf '%-36s %-14s %12s %12s %9s\n' workload measure "gates off" "gates kept" increase
for workload in "update update" "start-end start_then_end"; do
  read -r name function <<<"$workload"
  read -r off_ir off_cy < <(count "$off" "$name" "$function")
  read -r kept_ir kept_cy < <(count "$kept" "$name" "$function")
  label=$([[ $name == update ]] && echo "an update" || echo "an operation starting, then ending")
  row "$label" instructions "$off_ir" "$kept_ir"
  row "$label" "est. cycles" "$off_cy" "$kept_cy"
done
