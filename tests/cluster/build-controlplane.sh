#!/usr/bin/env bash
# Builds the pinned kube-apiserver, kube-controller-manager, kubectl and etcd from the Go module
# proxy into a cache keyed by version, and prints the directory holding them. Binaries already in
# the cache are not rebuilt, so a second run takes a moment.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_version="$(awk '/^require k8s.io\/kubernetes /{print $3}' "$here/kubernetes/go.mod")"
etcd_version="$(awk '/^require go.etcd.io\/etcd\/server\/v3 /{print $3}' "$here/etcd/go.mod")"
cache_root="${IFO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ifo}"
out="$cache_root/controlplane/k8s-${k8s_version}-etcd-${etcd_version}"

kube_cmds=(kube-apiserver kube-controller-manager kubectl)
missing=()
for bin in "${kube_cmds[@]}" etcd; do
  [[ -x "$out/$bin" ]] || missing+=("$bin")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$out"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain (go 1.26 or newer) is needed to build ${missing[*]} from the Go module" >&2
  echo "       proxy; install it from https://go.dev/dl or your distribution's golang package." >&2
  exit 1
fi

mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# Version stamps so kubectl and the servers report the real release instead of v0.0.0.
major="${k8s_version#v}"; major="${major%%.*}"
minor="${k8s_version#v*.}"; minor="${minor%%.*}"
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor"
ldflags="$ldflags -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"

export CGO_ENABLED=0 GOFLAGS=-mod=mod
for bin in "${missing[@]}"; do
  echo "building $bin (Kubernetes $k8s_version, etcd $etcd_version) into $out; the first build takes several minutes" >&2
  if [[ "$bin" == etcd ]]; then
    (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  else
    (cd "$here/kubernetes" && go build -trimpath -ldflags "$ldflags" -o "$tmp/$bin" "k8s.io/kubernetes/cmd/$bin")
  fi
  mv "$tmp/$bin" "$out/$bin"
done
echo "$out"
