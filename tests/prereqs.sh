#!/usr/bin/env bash
# Checks (and where possible installs) what building and testing the project needs: a Rust
# toolchain, the Go toolchain (for the pinned control plane), OpenSSL headers with pkg-config, the
# openssl command (certs/generate.sh), jq (deploy/image.sh), Node.js with npm (the page of
# `kubectl ifo ui`, built by plugin/build.rs), and for its browser test Chromium with its WebDriver;
# for the real node, containerd, runc, the CNI plugins, iptables and conntrack.
# Sourced by the run and test commands; stops with a clear message when something is missing.

# Installs Debian packages when this is a Debian-like machine and we are root; otherwise does
# nothing, and the caller's check reports what is missing.
ifo_apt_install() {
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian packages: $*" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1; then
      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    fi
  fi
}

# ifo_report_missing WHOSE ITEM...: fails listing the ITEMs, if any, as "missing prerequisites"
# (WHOSE says of what, e.g. " of the real node").
ifo_report_missing() {
  local whose="$1"
  shift
  [[ $# -eq 0 ]] && return 0
  echo "error: missing prerequisites${whose}:" >&2
  printf '  - %s\n' "$@" >&2
  return 1
}

ifo_prereqs() {
  local missing=()
  command -v cargo >/dev/null 2>&1 || missing+=("cargo (Rust 1.89 or newer: https://rustup.rs)")
  command -v go >/dev/null 2>&1 || missing+=("go (Go 1.26 or newer: https://go.dev/dl) to build kube-apiserver, kubectl and etcd")
  pkg-config --exists openssl 2>/dev/null || ifo_apt_install libssl-dev pkg-config
  pkg-config --exists openssl 2>/dev/null || missing+=("OpenSSL headers and pkg-config (Debian: apt-get install libssl-dev pkg-config)")
  command -v openssl >/dev/null 2>&1 || ifo_apt_install openssl
  command -v openssl >/dev/null 2>&1 || missing+=("openssl, the command (for certs/generate.sh and its tests; Debian: apt-get install openssl)")
  command -v jq >/dev/null 2>&1 || ifo_apt_install jq
  command -v jq >/dev/null 2>&1 || missing+=("jq (for deploy/image.sh and its test; Debian: apt-get install jq)")
  command -v npm >/dev/null 2>&1 || ifo_apt_install nodejs npm
  command -v npm >/dev/null 2>&1 || missing+=("Node.js with npm (builds the page of kubectl ifo ui; Debian: apt-get install nodejs npm)")
  ifo_report_missing "" "${missing[@]}"
}

# Headless Chromium and its WebDriver, for the browser test of `kubectl ifo ui` (tests/e2e/ui.rs).
ifo_browser() {
  command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 ||
    ifo_apt_install chromium chromium-driver
  if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    echo "error: the browser test needs Chromium and chromedriver (Debian: apt-get install chromium chromium-driver)" >&2
    return 1
  fi
}

# What a real node of the local cluster needs on this machine: root (it runs containers, changes
# iptables and mounts), containerd with runc, the CNI plugins, iptables, conntrack, ip, and a
# static C library for the pause image.
ifo_node_prereqs() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "error: the real node runs containers and sets up their network: it needs root" >&2
    return 1
  fi
  local need=() missing=()
  command -v containerd >/dev/null 2>&1 || need+=(containerd)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v gcc >/dev/null 2>&1 || need+=(gcc)
  [[ -f /usr/lib/x86_64-linux-gnu/libc.a || -f /usr/lib/libc.a ]] || need+=(libc6-dev)
  [[ ${#need[@]} -eq 0 ]] || ifo_apt_install "${need[@]}"
  command -v containerd >/dev/null 2>&1 || missing+=("containerd (Debian: apt-get install containerd)")
  command -v runc >/dev/null 2>&1 || missing+=("runc (Debian: apt-get install runc)")
  [[ -x /usr/lib/cni/bridge ]] || missing+=("the CNI plugins in /usr/lib/cni (Debian: apt-get install containernetworking-plugins)")
  command -v iptables >/dev/null 2>&1 || missing+=("iptables (Debian: apt-get install iptables)")
  command -v conntrack >/dev/null 2>&1 || missing+=("conntrack (Debian: apt-get install conntrack)")
  command -v ip >/dev/null 2>&1 || missing+=("ip, for the node's bridge (Debian: apt-get install iproute2)")
  command -v gcc >/dev/null 2>&1 || missing+=("gcc with the static C library, for the pause image (Debian: apt-get install gcc libc6-dev)")
  ifo_report_missing " of the real node" "${missing[@]}"
}

# Builds (or finds in the cache) the pinned control plane, and points the Rust code at it. Its
# build output goes to stderr, apart from what the caller prints.
ifo_controlplane() {
  IFO_CONTROLPLANE_DIR="$(bash tests/cluster/build-controlplane.sh)"
  export IFO_CONTROLPLANE_DIR
}

# The control plane and what a real node runs (kubelet, kube-proxy, kube-scheduler, the pause
# image), with the node's prerequisites.
ifo_node() {
  ifo_node_prereqs
  IFO_CONTROLPLANE_DIR="$(bash tests/cluster/build-controlplane.sh --node)"
  export IFO_CONTROLPLANE_DIR
}

# Builds (or finds in the cache) promtool, for the alert rule tests, and the Prometheus server of
# the same version, for the test of the dashboard's and alerts' queries, and points them at both;
# an IFO_PROMTOOL or IFO_PROMETHEUS already set to a binary is used as it is.
ifo_promtool() {
  local tools=() paths tool
  [[ -n "${IFO_PROMTOOL:-}" && -x "$IFO_PROMTOOL" ]] || tools+=(promtool)
  [[ -n "${IFO_PROMETHEUS:-}" && -x "$IFO_PROMETHEUS" ]] || tools+=(prometheus)
  if [[ ${#tools[@]} -gt 0 ]]; then
    paths="$(bash tests/cluster/build-promtool.sh "${tools[@]}")"
    for tool in "${tools[@]}"; do
      case "$tool" in
        promtool) IFO_PROMTOOL="$(grep '/promtool$' <<<"$paths")" ;;
        prometheus) IFO_PROMETHEUS="$(grep '/prometheus$' <<<"$paths")" ;;
      esac
    done
  fi
  export IFO_PROMTOOL IFO_PROMETHEUS
}

# ifo_helm: IFO_HELM, the pinned helm the chart's tests use, built and cached on first use
# (tests/cluster/build-helm.sh) unless IFO_HELM already names one.
ifo_helm() {
  if [[ -z "${IFO_HELM:-}" || ! -x "$IFO_HELM" ]]; then
    IFO_HELM="$(bash tests/cluster/build-helm.sh)"
  fi
  export IFO_HELM
}

# How long each step of a run took (tests/run.sh prints them at its end, failed or not): the
# set-up's (Debian packages, builds) and each part's, so a new machine's run says where its time
# went.
ifo_times=()

# ifo_time_note NAME SECONDS: notes that NAME took SECONDS.
ifo_time_note() {
  ifo_times+=("$(printf '%-58s %3dm%02ds' "$1" $(($2 / 60)) $(($2 % 60)))")
}

# ifo_timed NAME COMMAND...: runs COMMAND (in this shell: a function may export what it sets) and
# notes how long it took; returns its status.
ifo_timed() {
  local name="$1" began status=0
  shift
  began=$(date +%s)
  "$@" || status=$?
  ifo_time_note "$name" $(($(date +%s) - began))
  return $status
}

# ifo_times_print [SINCE]: prints what ifo_time_note noted, and the whole time since SINCE (a
# time in seconds since the epoch), if given.
ifo_times_print() {
  [[ ${#ifo_times[@]} -gt 0 ]] || return 0
  echo "== times (the set-up's steps, then each part's; parts ran beside each other)" >&2
  printf '  %s
' "${ifo_times[@]}" >&2
  if [[ -n "${1:-}" ]]; then
    local secs=$(($(date +%s) - $1))
    printf '  %-58s %3dm%02ds
' "the whole run" $((secs / 60)) $((secs % 60)) >&2
  fi
}

# The parts of a run that go on side by side (tests/run.sh): each in the background under its own
# time limit, its output in a log file of its own, printed in full with how it ended when it ends.
declare -A ifo_part_pid=() ifo_part_began=() ifo_part_limit=()
ifo_part_logs=""
ifo_parts_failed=0

# ifo_part_start NAME LIMIT COMMAND...: runs COMMAND (a program, or a function exported with
# `export -f`) in the background, stopped after LIMIT (timeout(1)'s syntax: 20m) with all it
# started; its stdout and stderr go to NAME's log.
ifo_part_start() {
  local name="$1" limit="$2"
  shift 2
  if [[ -z "$ifo_part_logs" ]]; then
    ifo_part_logs="$(mktemp -d "${TMPDIR:-/tmp}/ifo-run.XXXXXX")"
  fi
  echo "== $name: started beside the rest (at most $limit; its output when it ends)" >&2
  if [[ $(type -t "$1") == function ]]; then
    set -- bash -c '"$@"' bash "$@"
  fi
  timeout --kill-after=30s "$limit" "$@" >"$ifo_part_logs/$name.log" 2>&1 </dev/null &
  ifo_part_pid[$name]=$!
  ifo_part_began[$name]=$(date +%s)
  ifo_part_limit[$name]=$limit
}

# ifo_part_wait [NAME]: waits for part NAME (without NAME: for whichever part ends next), prints
# its output and how it ended; returns 0 when it succeeded, 1 when it failed (counted in
# ifo_parts_failed) and 2 when no part is left.
ifo_part_wait() {
  local name="${1:-}" status=0 pid ended
  [[ ${#ifo_part_pid[@]} -gt 0 ]] || return 2
  if [[ -n "$name" ]]; then
    wait "${ifo_part_pid[$name]}" || status=$?
  else
    wait -n -p pid "${ifo_part_pid[@]}" || status=$?
    for name in "${!ifo_part_pid[@]}"; do
      [[ "${ifo_part_pid[$name]}" == "$pid" ]] && break
    done
  fi
  # It may have ended while another part was waited for: its log's last write says when.
  ended=$(stat -c %Y "$ifo_part_logs/$name.log")
  local log="$ifo_part_logs/$name.log" secs=$((ended - ifo_part_began[$name]))
  local took="$((secs / 60))m$((secs % 60))s"
  unset "ifo_part_pid[$name]"
  ifo_time_note "part $name$([[ $status -eq 0 ]] || echo " (failed)")" "$secs"
  echo "== $name: output ($log)" >&2
  cat "$log"
  case "$status" in
    0) echo "== $name: ok in $took" >&2 ;;
    124 | 137) echo "== $name: FAILED: still running after its limit of ${ifo_part_limit[$name]}, stopped" >&2 ;;
    *) echo "== $name: FAILED (exit status $status) after $took" >&2 ;;
  esac
  if [[ $status -ne 0 ]]; then
    ifo_parts_failed=$((ifo_parts_failed + 1))
    return 1
  fi
}

# ifo_part_stop_all: stops the parts still running (after a failure that makes them pointless).
ifo_part_stop_all() {
  local name
  for name in "${!ifo_part_pid[@]}"; do
    kill "${ifo_part_pid[$name]}" 2>/dev/null || true
  done
}
