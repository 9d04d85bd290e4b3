#!/usr/bin/env bash
# Assembles the server image without a registry: the release binaries built here, the shared
# libraries they link (as `ldd` lists them), the CA certificates, user 65532 — the runtime image the
# Dockerfile describes — written as an OCI image archive.
#
#   deploy/image.sh [OUT.tar]        # builds the release binaries first
#   deploy/image.sh --binaries-only  # only builds them and prints their paths (for IFO_BINARIES)
#   IFO_BINARIES="path/ifo-apiserver path/kubectl-ifo" deploy/image.sh OUT.tar   # uses given binaries
#
# Import it into containerd with
#   ctr -n k8s.io images import OUT.tar
# (the archive names the image docker.io/library/ifo-apiserver:<version>).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
out=${1:-$PWD/ifo-apiserver-$version.oci.tar}
name="docker.io/library/ifo-apiserver:$version"

die() { echo "image.sh: $*" >&2; exit 1; }

# The release binaries, by the plain compiler (CI builds the tests with clippy-driver as the
# workspace's compiler wrapper; the image is what users build).
build_binaries() {
    (cd "$root" && env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS \
        cargo build --release --locked -p ifo -p kubectl-ifo --bin ifo-apiserver --bin kubectl-ifo)
}
target=${CARGO_TARGET_DIR:-$root/target}
if [ "${1:-}" = --binaries-only ]; then
    build_binaries
    echo "$target/release/ifo-apiserver $target/release/kubectl-ifo"
    exit 0
fi
for tool in ldd; do
    command -v "$tool" >/dev/null || die "needs '$tool' (tests/prereqs.sh installs it)"
done
cacerts=/etc/ssl/certs/ca-certificates.crt
[ -f "$cacerts" ] || die "no CA bundle at $cacerts (install the ca-certificates package)"

if [ -z "${IFO_BINARIES:-}" ]; then
    build_binaries
    IFO_BINARIES="$target/release/ifo-apiserver $target/release/kubectl-ifo"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"

# The binaries at / (as the Dockerfile copies them) and every library they link, at its path.
for bin in $IFO_BINARIES; do
    [ -x "$bin" ] || die "no executable at $bin"
    install -m 0755 "$bin" "$rootfs/$(basename "$bin")"
    ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r lib; do
        [ -n "$lib" ] || continue
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done
done
cp -L "$cacerts" "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"

# The runtime settings of the Dockerfile's final stage.
config='{
  "User": "65532:65532",
  "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "BIND_ADDRESS=0.0.0.0"],
  "Entrypoint": ["/ifo-apiserver", "serve"],
  "ExposedPorts": {"8443/tcp": {}, "9443/tcp": {}, "8081/tcp": {}}
}'
echo -n "image.sh: "
"$root/deploy/oci-archive.sh" "$rootfs" "$config" "$name" "$out"
