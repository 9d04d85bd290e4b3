#!/usr/bin/env bash
# Packages `kubectl ifo` for Krew: the release binary in a tar.gz, and the manifest
# (plugin/krew/ifo.yaml) with the version, the archive's URL and its sha256 filled in.
#
#   plugin/krew/package.sh BASE_URL HOMEPAGE [OUT_DIR]
#
# BASE_URL is where the archive will be published (the manifest's uri is
# BASE_URL/kubectl-ifo_<version>_linux_amd64.tar.gz); HOMEPAGE is the project's page;
# OUT_DIR defaults to target/krew.
# IFO_PLUGIN_BINARY names a binary already built (otherwise `cargo build --release` builds it).
# The archive's copy is stripped (`strip`, from binutils).
set -euo pipefail

[ $# -ge 2 ] || { sed -n '5p' "$0" | sed 's/^#  *//' >&2; exit 2; }
base_url=${1%/}
homepage=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-$root/target/krew}
version="v$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"

binary=${IFO_PLUGIN_BINARY:-}
if [ -z "$binary" ]; then
    (cd "$root" && cargo build --release --locked -p kubectl-ifo --bin kubectl-ifo)
    binary=${CARGO_TARGET_DIR:-$root/target}/release/kubectl-ifo
fi
[ -x "$binary" ] || { echo "package.sh: no executable at $binary" >&2; exit 1; }

mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
install -m 0755 "$binary" "$work/kubectl-ifo"
# What users download carries no symbols or debug info (16 MB -> 12 MB for a release build).
command -v strip >/dev/null || { echo "package.sh: strip is missing (install binutils)" >&2; exit 1; }
strip "$work/kubectl-ifo"
archive="kubectl-ifo_${version}_linux_amd64.tar.gz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" -cf - kubectl-ifo \
    | gzip -n -9 >"$out/$archive"
sha=$(sha256sum "$out/$archive" | cut -d' ' -f1)
sed -e "s|VERSION|$version|" -e "s|HOMEPAGE|$homepage|" -e "s|URI|$base_url/$archive|" \
    -e "s|SHA256|$sha|" "$root/plugin/krew/ifo.yaml" >"$out/ifo.yaml"
echo "$out/ifo.yaml (kubectl krew install --manifest=$out/ifo.yaml --archive=$out/$archive)"
