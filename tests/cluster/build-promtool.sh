#!/usr/bin/env bash
# Builds the pinned promtool (Prometheus' rule checker and tester) from the Go module proxy into a
# cache keyed by version, and prints its path. A second run finds it in the cache.
# `build-promtool.sh prometheus` builds the Prometheus server of the same version the same way
# (the monitoring queries' test scrapes the local server with it).
#
# `go install github.com/prometheus/prometheus/cmd/promtool@<version>` refuses the module (its
# go.mod has a replace directive), so it is built from a module of ours that requires it
# (promtool/go.mod, with the same replace).
set -euo pipefail

tool="${1:-promtool}"
case "$tool" in
  promtool | prometheus) ;;
  *)
    echo "error: builds promtool or prometheus, not $tool" >&2
    exit 2
    ;;
esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/go-build.sh"
version="$(awk '/^require github.com\/prometheus\/prometheus /{print $3}' "$here/promtool/go.mod")"
out="$ifo_cache_root/promtool/prometheus-${version}"

if [[ -x "$out/$tool" ]]; then
  echo "$out/$tool"
  exit 0
fi
ifo_need_go "$tool (it tests the alert rules and queries of deploy/monitoring/)"
ifo_build_dir "$out"
echo "building $tool (Prometheus module $version) into $out; the first build takes several minutes" >&2
if ! (cd "$here/promtool" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" \
    -o "$tmp/$tool" "github.com/prometheus/prometheus/cmd/$tool"); then
  echo "error: building $tool from github.com/prometheus/prometheus $version failed (see above);" >&2
  echo "       the monitoring tests (tests/monitoring.rs) need it: set IFO_${tool^^} to a $tool binary to skip the build." >&2
  exit 1
fi
mv "$tmp/$tool" "$out/$tool"
echo "$out/$tool"
