#!/usr/bin/env bash
# Builds the pinned promtool (Prometheus' rule checker and tester) from the Go module proxy into a
# cache keyed by version, and prints its path. A second run finds it in the cache.
#
# `go install github.com/prometheus/prometheus/cmd/promtool@<version>` refuses the module (its
# go.mod has a replace directive), so it is built from a module of ours that requires it
# (promtool/go.mod, with the same replace).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(awk '/^require github.com\/prometheus\/prometheus /{print $3}' "$here/promtool/go.mod")"
cache_root="${IFO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ifo}"
out="$cache_root/promtool/prometheus-${version}"

if [[ -x "$out/promtool" ]]; then
  echo "$out/promtool"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain (go 1.26 or newer) is needed to build promtool from the Go module proxy," >&2
  echo "       which tests the alert rules of deploy/monitoring/; install it from https://go.dev/dl." >&2
  exit 1
fi
mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "building promtool (Prometheus module $version) into $out; the first build takes several minutes" >&2
if ! (cd "$here/promtool" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" \
    -o "$tmp/promtool" github.com/prometheus/prometheus/cmd/promtool); then
  echo "error: building promtool from github.com/prometheus/prometheus $version failed (see above);" >&2
  echo "       the alert rule tests (tests/monitoring.rs) need it: set IFO_PROMTOOL to a promtool binary to skip the build." >&2
  exit 1
fi
mv "$tmp/promtool" "$out/promtool"
echo "$out/promtool"
