#!/usr/bin/env bash
# Builds the pinned kube-apiserver, kube-controller-manager, kubectl and etcd from the Go module
# proxy into a cache keyed by version, and prints the directory holding them. Binaries already in
# the cache are not rebuilt, so a second run takes a moment.
#
#   tests/cluster/build-controlplane.sh [--node] [--oldest]
#
# --node also builds what a real node of the local cluster runs: kubelet, kube-proxy and
# kube-scheduler from the same release, and the pod sandbox ("pause") image, a tiny static program
# packed as an OCI archive (pause.oci.tar), since no registry is reachable.
# --oldest builds the oldest minor still supported upstream (kubernetes-oldest/go.mod) instead of
# the pinned release (kubernetes/go.mod), for the smoke run on it.
set -euo pipefail

node=false
release=kubernetes
for arg in "$@"; do
  case "$arg" in
    --node) node=true ;;
    --oldest) release=kubernetes-oldest ;;
    *) echo "usage: $0 [--node] [--oldest]" >&2; exit 2 ;;
  esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/go-build.sh"
k8s_version="$(awk '/^require k8s.io\/kubernetes /{print $3}' "$here/$release/go.mod")"
etcd_version="$(awk '/^require go.etcd.io\/etcd\/server\/v3 /{print $3}' "$here/etcd/go.mod")"
out="$ifo_cache_root/controlplane/k8s-${k8s_version}-etcd-${etcd_version}"
ifo_build_lock "controlplane-$k8s_version"

kube_cmds=(kube-apiserver kube-controller-manager kubectl)
if $node; then
  kube_cmds+=(kubelet kube-proxy kube-scheduler)
fi
missing=()
for bin in "${kube_cmds[@]}" etcd; do
  [[ -x "$out/$bin" ]] || missing+=("$bin")
done
if $node && [[ ! -f "$out/pause.oci.tar" ]]; then
  missing+=(pause)
fi
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$out"
  exit 0
fi

ifo_need_go "${missing[*]}"
ifo_build_dir "$out"

# Version stamps so kubectl and the servers report the real release instead of v0.0.0.
major="${k8s_version#v}"; major="${major%%.*}"
minor="${k8s_version#v*.}"; minor="${minor%%.*}"
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor"
ldflags="$ldflags -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"

# The sandbox every pod's network namespace lives in: sleeps until told to stop, reaps orphans.
build_pause() {
  echo "building the pause image into $out" >&2
  if ! command -v gcc >/dev/null 2>&1; then
    echo "error: gcc (with the static C library: Debian packages gcc, libc6-dev) builds the pause image" >&2
    exit 1
  fi
  mkdir -p "$tmp/pause-rootfs"
  cat >"$tmp/pause.c" <<'C'
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, stop);
  signal(SIGTERM, stop);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
C
  gcc -static -O2 -o "$tmp/pause-rootfs/pause" "$tmp/pause.c"
  "$here/../../deploy/oci-archive.sh" "$tmp/pause-rootfs" '{"Entrypoint":["/pause"],"User":"65535:65535"}' \
    "$pause_image" "$tmp/pause.oci.tar" >&2
  mv "$tmp/pause.oci.tar" "$out/pause.oci.tar"
}
pause_image=docker.io/library/ifo-pause:1

export CGO_ENABLED=0 GOFLAGS=-mod=mod
echo "building ${missing[*]} (Kubernetes $k8s_version, etcd $etcd_version) into $out; the first build takes several minutes" >&2
# The Kubernetes commands in one `go build` (their packages compiled once, their links side by
# side), etcd and the pause image beside it.
kube_missing=()
pids=()
for bin in "${missing[@]}"; do
  case "$bin" in
    pause) build_pause & pids+=($!) ;;
    etcd)
      (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3) &
      pids+=($!)
      ;;
    *) kube_missing+=("$bin") ;;
  esac
done
if [[ ${#kube_missing[@]} -gt 0 ]]; then
  mkdir -p "$tmp/kube"
  (cd "$here/$release" && go build -trimpath -ldflags "$ldflags" -o "$tmp/kube/" \
    "${kube_missing[@]/#/k8s.io/kubernetes/cmd/}") &
  pids+=($!)
fi
failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
if [[ $failed -ne 0 ]]; then
  echo "error: building the control plane failed (above)" >&2
  exit 1
fi
for bin in "${kube_missing[@]}"; do
  mv "$tmp/kube/$bin" "$out/$bin"
done
[[ -f "$tmp/etcd" ]] && mv "$tmp/etcd" "$out/etcd"
echo "$out"
