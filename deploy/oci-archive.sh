#!/usr/bin/env bash
# Packs a root filesystem into a single-layer OCI image archive that `ctr images import` (and any
# OCI tool) loads, without a registry or a container engine. Reproducible: fixed owners and times.
#
#   deploy/oci-archive.sh ROOTFS_DIR CONFIG_JSON IMAGE_NAME OUT.tar
#
# CONFIG_JSON is the image's runtime settings (the OCI config's `config` object: User, Env,
# Entrypoint, ExposedPorts); IMAGE_NAME is the full name the archive carries, e.g.
# docker.io/library/ifo-apiserver:0.1.0. Prints the layer's compressed and unpacked sizes.
set -euo pipefail

[ $# -eq 4 ] || { sed -n '5p' "$0" | sed 's/^#  *//' >&2; exit 2; }
rootfs=$1 runtime_config=$2 name=$3 out=$4
die() { echo "oci-archive.sh: $*" >&2; exit 1; }
for tool in jq sha256sum tar gzip; do
    command -v "$tool" >/dev/null || die "needs '$tool' (tests/prereqs.sh installs it)"
done
[ -d "$rootfs" ] || die "no directory $rootfs"
jq -e 'type == "object"' <<<"$runtime_config" >/dev/null || die "CONFIG_JSON is not a JSON object"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/blobs/sha256"

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" -cf "$work/layer.tar" .
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
unpacked=$(stat -c %s "$work/layer.tar")
gzip -n -9 <"$work/layer.tar" >"$work/layer.tar.gz"
blob() { # moves a file into blobs/, prints "digest size"
    local d s
    d=$(sha256sum "$1" | cut -d' ' -f1)
    s=$(stat -c %s "$1")
    mv "$1" "$work/blobs/sha256/$d"
    echo "$d $s"
}
read -r layer_digest layer_size < <(blob "$work/layer.tar.gz")

jq -n --arg diff "sha256:$diff_id" --argjson config "$runtime_config" '{
  architecture: "amd64", os: "linux", config: $config,
  rootfs: {type: "layers", diff_ids: [$diff]}
}' >"$work/config.json"
read -r config_digest config_size < <(blob "$work/config.json")

jq -n --arg c "$config_digest" --argjson cs "$config_size" --arg l "$layer_digest" --argjson ls "$layer_size" '{
  schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
  config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: ("sha256:" + $c), size: $cs},
  layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: ("sha256:" + $l), size: $ls}]
}' >"$work/manifest.json"
read -r manifest_digest manifest_size < <(blob "$work/manifest.json")

jq -n --arg m "$manifest_digest" --argjson ms "$manifest_size" --arg n "$name" '{
  schemaVersion: 2,
  manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: ("sha256:" + $m),
    size: $ms, annotations: {"io.containerd.image.name": $n, "org.opencontainers.image.ref.name": $n}}]
}' >"$work/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci-layout"

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" \
    -cf "$out" oci-layout index.json blobs
echo "$name → $out (layer $((layer_size / 1024)) KiB compressed, $((unpacked / 1024)) KiB unpacked)"
