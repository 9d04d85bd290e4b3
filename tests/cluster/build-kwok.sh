#!/usr/bin/env bash
# Builds the pinned KWOK controller (`kwok`: fake nodes that heartbeat, pods moved through their
# stages) from the Go module proxy into a cache keyed by version, and prints its path. A second
# run finds it in the cache. The envelope benchmark (`tests/bench.sh --pods --kwok`) runs it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/go-build.sh"
version="$(awk '/^require sigs.k8s.io\/kwok /{print $3}' "$here/kwok/go.mod")"
out="$ifo_cache_root/kwok/kwok-${version}"
ifo_build_lock kwok

if [[ ! -x "$out/kwok" ]]; then
  ifo_need_go "kwok (the envelope benchmark's nodes and pods)"
  ifo_build_dir "$out"
  echo "building kwok (sigs.k8s.io/kwok $version) into $out; the first build takes a few minutes" >&2
  if ! (cd "$here/kwok" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" \
      -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok); then
    echo "error: building kwok from sigs.k8s.io/kwok $version failed (see above); set IFO_KWOK" >&2
    echo "       to a kwok binary of that release to skip the build." >&2
    exit 1
  fi
  mv "$tmp/kwok" "$out/kwok"
fi
echo "$out/kwok"
