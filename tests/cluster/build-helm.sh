#!/usr/bin/env bash
# Builds the pinned helm (the chart's tests install, upgrade and uninstall deploy/chart/ with it)
# from the Go module proxy into a cache keyed by version, and prints its path. A second run finds
# it in the cache.
set -euo pipefail

# The Helm release users run today (3.x); the chart needs nothing newer.
version=v3.22.0
# The Kubernetes version `helm template` and `helm lint` assume without a cluster, as Helm's own
# release build sets it (its Makefile: from its client-go, v0.37.0 for v3.22.0): a chart's
# `kubeVersion` is checked against it.
kube_major=1
kube_minor=37
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/go-build.sh"
out="$ifo_cache_root/helm/helm-${version}-k8s-${kube_major}.${kube_minor}"
ifo_build_lock helm

if [[ ! -x "$out/helm" ]]; then
  ifo_need_go "helm (it lints, renders, installs, upgrades and uninstalls deploy/chart/ in the tests)"
  ifo_build_dir "$out"
  echo "building helm $version into $out; the first build takes a few minutes" >&2
  if ! (cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install -trimpath \
      -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version \
        -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$kube_major \
        -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kube_minor \
        -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$kube_major \
        -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$kube_minor" \
      "helm.sh/helm/v3/cmd/helm@$version"); then
    echo "error: building helm $version from the Go module proxy failed (see above); the chart's" >&2
    echo "       tests (tests/chart.rs, the real node's) need it: set IFO_HELM to a helm binary" >&2
    echo "       to skip the build." >&2
    exit 1
  fi
  mv "$tmp/helm" "$out/helm"
fi
echo "$out/helm"
