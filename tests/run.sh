#!/usr/bin/env bash
# Runs every test: unit tests, the rules library's cases, the end-to-end tests against a real
# kube-apiserver + etcd built from the pinned Kubernetes release, and the install on a real node
# (kubelet, kube-proxy, kube-scheduler from the same release; containerd, runc and the CNI
# plugins from Debian's packages), then a smoke run of the install on the oldest Kubernetes minor
# still supported upstream. Everything is built or installed on the first run and cached.
#
#   tests/run.sh [--clippy]
#
# --clippy (CI: .ci/run) makes the test build clippy's check too: clippy-driver compiles the
# workspace's crates with clippy's lints as errors (-D warnings), so every crate is compiled once,
# not checked for `cargo clippy` and compiled again for the tests.
#
# Builds: the Go builds (the control plane with the node's pieces, of the pinned release and, at the
# lowest priority until cargo is done, of the oldest supported minor; promtool and Prometheus;
# helm) run in the background while cargo builds the tests and then the release binaries of the
# image the real node runs; the tests start once they are all done. Tests, each test binary
# starting its own cluster on free loopback ports in its own
# directory: the real node (`tests/node/`, which mostly waits on kubelet and containerd, and alone
# touches the machine's network, iptables and kernel settings; then its smoke run, `--smoke`, on
# the oldest supported minor) beside the rest; the test binaries
# that do not load the machine in two parts side by side (with the unit tests and the doctests);
# then, one after the other, the two that do, `e2e` and `robustness`, and `persist`. A part running in the
# background writes to a log of its own, printed in full with how it ended (and how long it took)
# when it ends; each part has its own time limit, and any part failing fails the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/prereqs.sh

clippy=false
case "${1:-}" in
  --clippy) clippy=true ;;
  "") ;;
  *)
    echo "usage: $0 [--clippy]" >&2
    exit 2
    ;;
esac

ifo_run_began=${IFO_RUN_BEGAN:-$(date +%s)}
[[ -z "${IFO_PREREQS_SECS:-}" ]] || ifo_time_note "prerequisites (.ci/run)" "$IFO_PREREQS_SECS"
ifo_timed "prerequisites (Debian packages)" ifo_prereqs
ifo_timed "the real node's prerequisites (Debian packages)" ifo_node_prereqs
ifo_timed "Chromium and chromedriver (Debian packages)" ifo_browser

# Stops what runs in the background when the run is interrupted or fails, and says where the
# time went.
trap 'ifo_part_stop_all; ifo_times_print "$ifo_run_began"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- Builds ------------------------------------------------------------------------------------
ifo_part_start controlplane 50m bash tests/cluster/build-controlplane.sh --node
# The oldest supported minor, for the smoke run after the real node's tests: at the lowest
# priority while cargo builds, it takes only the cores cargo leaves idle.
ifo_part_start oldest 50m nice -n 19 bash tests/cluster/build-controlplane.sh --node --oldest
prometheus_tools=()
[[ -x "${IFO_PROMTOOL:-}" ]] || prometheus_tools+=(promtool)
[[ -x "${IFO_PROMETHEUS:-}" ]] || prometheus_tools+=(prometheus)
if [[ ${#prometheus_tools[@]} -gt 0 ]]; then
  ifo_part_start prometheus 50m bash tests/cluster/build-promtool.sh "${prometheus_tools[@]}"
fi
if [[ ! -x "${IFO_HELM:-}" ]]; then
  ifo_part_start helm 30m bash tests/cluster/build-helm.sh
fi

if $clippy; then
  # As `cargo clippy` runs it: clippy-driver as the compiler of the workspace's crates only, with
  # the arguments that follow `cargo clippy --` in CLIPPY_ARGS.
  RUSTC_WORKSPACE_WRAPPER="$(command -v clippy-driver)"
  CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
  export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
  echo "== cargo build --locked --workspace --all-targets, with clippy's lints (-D warnings)" >&2
else
  echo "== cargo build --locked --workspace --all-targets" >&2
fi
if ! ifo_timed "cargo build of the workspace" timeout --foreground 45m cargo build --locked --workspace --all-targets; then
  if $clippy; then
    echo "error: the build failed or clippy reports warnings (above); fix them, they fail CI" >&2
  fi
  exit 1
fi
# The image of the real node's tests is assembled from these (IFO_BINARIES), as users build it.
echo "== the release binaries of the real node's image (deploy/image.sh --binaries-only)" >&2
began=$(date +%s)
IFO_BINARIES="$(timeout --foreground 30m bash deploy/image.sh --binaries-only)"
ifo_time_note "release binaries (deploy/image.sh --binaries-only)" $(($(date +%s) - began))
export IFO_BINARIES

ifo_part_wait controlplane || exit 1
ifo_timed "the real node's pieces (cached)" ifo_node
# cargo is done: the oldest minor's build, if it is not, goes on at the normal priority (its
# process group: `timeout` leads one) and ends before the tests, which never share the machine
# with it.
renice -n 0 -g "${ifo_part_pid[oldest]}" >/dev/null 2>&1 || true
ifo_part_wait oldest || exit 1
if [[ ${#prometheus_tools[@]} -gt 0 ]]; then
  ifo_part_wait prometheus || exit 1
fi
ifo_timed "promtool and Prometheus (cached)" ifo_promtool
if [[ ! -x "${IFO_HELM:-}" ]]; then
  ifo_part_wait helm || exit 1
fi
ifo_timed "helm (cached)" ifo_helm

# --- Tests -------------------------------------------------------------------------------------
# Every test target of the workspace (as `cargo test --workspace` would run them), by part: the
# two that load the machine run last, one after the other, and `persist` after them (its
# two-replica test needs the machine to itself); before them the others side by side (`blind`,
# `readme`, `restart`, `managed` and `certificates` apart from the rest, for balance), with the
# real node beside them.
loading=(e2e robustness persist)
apart=(blind readme restart managed certificates)
rest=()
while read -r target; do
  case " node ${loading[*]} ${apart[*]} " in
    *" $target "*) ;;
    *) rest+=("--test=$target") ;;
  esac
done < <(cargo metadata --locked --no-deps --format-version 1 |
  jq -r '.packages[].targets[] | select(.kind == ["test"]) | .name')

# The node's tests on the pinned release, then the smoke run on the oldest supported minor.
run_node() {
  local status=0 oldest
  cargo test --locked -p ifo --test node -- --test-threads=4 || status=1
  if oldest="$(bash tests/cluster/build-controlplane.sh --node --oldest)"; then
    IFO_CONTROLPLANE_DIR="$oldest" cargo test --locked -p ifo --test node -- --smoke || status=1
  else
    status=1
  fi
  return $status
}
# One after the other.
run_binaries() {
  local status=0 target
  for target in "$@"; do
    cargo test --locked -p ifo --test "$target" -- --test-threads=4 || status=1
  done
  return $status
}
run_rest() {
  local status=0
  cargo test --locked --no-fail-fast --workspace --lib --bins "$@" -- --test-threads=4 || status=1
  cargo test --locked --workspace --doc -- --test-threads=4 || status=1
  return $status
}
export -f run_node run_binaries run_rest
ifo_part_start node 40m run_node
ifo_part_start apart 30m run_binaries "${apart[@]}"
ifo_part_start rest 30m run_rest "${rest[@]}"
ifo_part_wait apart || true
ifo_part_wait rest || true
ifo_part_start loading 40m run_binaries "${loading[@]}"
while ifo_part_wait; [[ $? -ne 2 ]]; do :; done

# The tally of every test binary's result line; a part that failed without a failed test (a build
# error, a timeout) counts as one failure.
read -r passed failed ignored < <(cat "$ifo_part_logs"/{node,apart,rest,loading}.log |
  sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored.*/\1 \2 \3/p' |
  awk '{ p += $1; f += $2; i += $3 } END { print p + 0, f + 0, i + 0 }')
if [[ $ifo_parts_failed -gt $failed ]]; then
  failed=$ifo_parts_failed
fi
echo "total: $passed passed, $failed failed$([[ $ignored -eq 0 ]] || echo ", $ignored skipped")"
[[ $ifo_parts_failed -eq 0 ]]
