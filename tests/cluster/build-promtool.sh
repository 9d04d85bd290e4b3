#!/usr/bin/env bash
# Builds the pinned promtool (Prometheus' rule checker and tester) from the Go module proxy into a
# cache keyed by version, and prints its path. A second run finds it in the cache.
# `build-promtool.sh prometheus` builds the Prometheus server of the same version the same way
# (the monitoring queries' test scrapes the local server with it); `build-promtool.sh promtool
# prometheus` builds both in one `go build` and prints both paths, one a line, in that order.
#
# `go install github.com/prometheus/prometheus/cmd/promtool@<version>` refuses the module (its
# go.mod has a replace directive), so it is built from a module of ours that requires it
# (promtool/go.mod, with the same replace).
set -euo pipefail

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(promtool)
for tool in "${tools[@]}"; do
  case "$tool" in
    promtool | prometheus) ;;
    *)
      echo "error: builds promtool or prometheus, not $tool" >&2
      exit 2
      ;;
  esac
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/go-build.sh"
version="$(awk '/^require github.com\/prometheus\/prometheus /{print $3}' "$here/promtool/go.mod")"
out="$ifo_cache_root/promtool/prometheus-${version}"
ifo_build_lock promtool

missing=()
for tool in "${tools[@]}"; do
  [[ -x "$out/$tool" ]] || missing+=("$tool")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  ifo_need_go "${missing[*]} (it tests the alert rules and queries of deploy/monitoring/)"
  ifo_build_dir "$out"
  echo "building ${missing[*]} (Prometheus module $version) into $out; the first build takes several minutes" >&2
  # remove_all_sd: without the service discoveries of cloud providers (the tests scrape static
  # targets; file and HTTP discovery stay), much less to compile.
  if ! (cd "$here/promtool" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags remove_all_sd \
      -ldflags "-s -w" -o "$tmp/" "${missing[@]/#/github.com/prometheus/prometheus/cmd/}"); then
    echo "error: building ${missing[*]} from github.com/prometheus/prometheus $version failed (see above);" >&2
    echo "       the monitoring tests (tests/monitoring.rs, tests/e2e/prometheus.rs) need them: set" >&2
    echo "       IFO_PROMTOOL and IFO_PROMETHEUS to the binaries to skip the build." >&2
    exit 1
  fi
  for tool in "${missing[@]}"; do
    mv "$tmp/$tool" "$out/$tool"
  done
fi
for tool in "${tools[@]}"; do
  echo "$out/$tool"
done
