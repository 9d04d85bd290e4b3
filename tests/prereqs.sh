#!/usr/bin/env bash
# Checks (and where possible installs) what building and testing the project needs: a Rust
# toolchain, the Go toolchain (for the pinned control plane), OpenSSL headers with pkg-config, the
# openssl command (certs/generate.sh) and jq (deploy/image.sh).
# Sourced by the run and test commands; stops with a clear message when something is missing.

ifo_prereqs() {
  local missing=()
  command -v cargo >/dev/null 2>&1 || missing+=("cargo (Rust 1.89 or newer: https://rustup.rs)")
  command -v go >/dev/null 2>&1 || missing+=("go (Go 1.26 or newer: https://go.dev/dl) to build kube-apiserver, kubectl and etcd")
  if ! pkg-config --exists openssl 2>/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
      echo "installing OpenSSL headers and pkg-config (Debian packages libssl-dev, pkg-config)" >&2
      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libssl-dev pkg-config >/dev/null
    fi
    pkg-config --exists openssl 2>/dev/null || missing+=("OpenSSL headers and pkg-config (Debian: apt-get install libssl-dev pkg-config)")
  fi
  if ! command -v openssl >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
      echo "installing the openssl command (Debian package openssl)" >&2
      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
    fi
    command -v openssl >/dev/null 2>&1 || missing+=("openssl, the command (for certs/generate.sh and its tests; Debian: apt-get install openssl)")
  fi
  if ! command -v jq >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
      echo "installing jq (Debian package jq)" >&2
      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null
    fi
    command -v jq >/dev/null 2>&1 || missing+=("jq (for deploy/image.sh and its test; Debian: apt-get install jq)")
  fi
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "error: missing prerequisites:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    return 1
  fi
}

# Builds (or finds in the cache) the pinned control plane, and points the Rust code at it. Its
# build output goes to stderr, apart from what the caller prints.
ifo_controlplane() {
  IFO_CONTROLPLANE_DIR="$(bash tests/cluster/build-controlplane.sh)"
  export IFO_CONTROLPLANE_DIR
}

# Builds (or finds in the cache) promtool, for the alert rule tests, and points them at it; an
# IFO_PROMTOOL already set to a binary is used as it is.
ifo_promtool() {
  if [[ -z "${IFO_PROMTOOL:-}" || ! -x "$IFO_PROMTOOL" ]]; then
    IFO_PROMTOOL="$(bash tests/cluster/build-promtool.sh)"
  fi
  export IFO_PROMTOOL
}
