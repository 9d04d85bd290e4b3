#!/usr/bin/env bash
# Builds the pinned helm (the chart's tests install, upgrade and uninstall deploy/chart/ with it)
# from the Go module proxy into a cache keyed by version, and prints its path. A second run finds
# it in the cache.
set -euo pipefail

# The Helm release users run today (3.x); the chart needs nothing newer.
version=v3.22.0
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/go-build.sh"
out="$ifo_cache_root/helm/helm-${version}"
ifo_build_lock helm

if [[ ! -x "$out/helm" ]]; then
  ifo_need_go "helm (it lints, renders, installs, upgrades and uninstalls deploy/chart/ in the tests)"
  ifo_build_dir "$out"
  echo "building helm $version into $out; the first build takes a few minutes" >&2
  if ! (cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install -trimpath \
      -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version" \
      "helm.sh/helm/v3/cmd/helm@$version"); then
    echo "error: building helm $version from the Go module proxy failed (see above); the chart's" >&2
    echo "       tests (tests/chart.rs, the real node's) need it: set IFO_HELM to a helm binary" >&2
    echo "       to skip the build." >&2
    exit 1
  fi
  mv "$tmp/helm" "$out/helm"
fi
echo "$out/helm"
