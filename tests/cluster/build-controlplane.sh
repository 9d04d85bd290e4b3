#!/usr/bin/env bash
# Builds the pinned kube-apiserver, kubectl and etcd from the Go module proxy into a cache keyed by
# version, and prints the directory holding them. A second run with the binaries present is instant.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_version="$(awk '/^require k8s.io\/kubernetes /{print $3}' "$here/kubernetes/go.mod")"
etcd_version="$(awk '/^require go.etcd.io\/etcd\/server\/v3 /{print $3}' "$here/etcd/go.mod")"
cache_root="${IFO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ifo}"
out="$cache_root/controlplane/k8s-${k8s_version}-etcd-${etcd_version}"

if [[ -x "$out/kube-apiserver" && -x "$out/kubectl" && -x "$out/etcd" ]]; then
  echo "$out"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain (go 1.26 or newer) is needed to build kube-apiserver, kubectl and etcd" >&2
  echo "       from the Go module proxy; install it from https://go.dev/dl or your distribution." >&2
  exit 1
fi

mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# Version stamps so kubectl and the server report the real release instead of v0.0.0.
major="${k8s_version#v}"; major="${major%%.*}"
minor="${k8s_version#v*.}"; minor="${minor%%.*}"
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor"
ldflags="$ldflags -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"

echo "building kube-apiserver and kubectl $k8s_version, etcd $etcd_version into $out (first run takes a while)" >&2
export CGO_ENABLED=0 GOFLAGS=-mod=mod
(cd "$here/kubernetes" && go build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
(cd "$here/kubernetes" && go build -trimpath -ldflags "$ldflags" -o "$tmp/kubectl" k8s.io/kubernetes/cmd/kubectl)
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
mv "$tmp/kube-apiserver" "$tmp/kubectl" "$tmp/etcd" "$out/"
echo "$out"
