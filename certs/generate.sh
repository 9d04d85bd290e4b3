#!/usr/bin/env bash
# Makes the certificates the live API needs without cert-manager, and the manifests that use them.
#
#   certs/generate.sh [--renew | --force] [OUT_DIR]   (OUT_DIR defaults to certs/out, which git ignores)
#
# Writes into OUT_DIR:
#   ca.crt, ca.key      a private CA (10 years); kube-apiserver trusts the server through it
#   tls.crt, tls.key    the serving certificate (1 year) for ifo-apiserver.ifo-system.svc,
#                       ifo-guard.ifo-system.svc (the maintenance guard's Service) and their
#                       .cluster.local names, signed by the CA
#   secret.yaml         Secret ifo-system/ifo-apiserver-tls, which the Deployment mounts
#   apiservice.yaml     apiservice/apiservice.yaml with caBundle set to the CA
#   webhook.yaml        apiservice/webhook.yaml (the validation of OperationRuleSets) with caBundle
#                       set to the CA
#   guard-webhook.yaml  apiservice/guard-webhook.yaml (the maintenance guard, opt-in: see
#                       deploy/guard/) with caBundle set to the CA
#
# Idempotent: an existing CA is kept, and so is an existing serving certificate while it is signed
# by that CA, names the Service and stays valid for 30 more days; otherwise a new one is issued.
# The manifests are written again on every run. --renew issues a new serving certificate under the
# existing CA (a rotation: apply the Secret again, the pods reload it without a restart, and the
# APIService and the webhook stay as they are); --force makes a new CA and serving certificate.
# Keys are written readable by their owner only; keep them out of version control.
set -euo pipefail

NAMESPACE=ifo-system
SERVICE=ifo-apiserver
SECRET=ifo-apiserver-tls
GUARD_SERVICE=ifo-guard
DNS_NAMES=("$SERVICE.$NAMESPACE.svc" "$SERVICE.$NAMESPACE.svc.cluster.local"
  "$GUARD_SERVICE.$NAMESPACE.svc" "$GUARD_SERVICE.$NAMESPACE.svc.cluster.local")

usage() {
  sed -n '4p' "${BASH_SOURCE[0]}" | sed 's/^#  *//' >&2
  exit 2
}

if ! command -v openssl >/dev/null 2>&1; then
  echo "error: certs/generate.sh needs the openssl command (Debian/Ubuntu: apt-get install openssl;" \
    "Fedora/RHEL: dnf install openssl; macOS: brew install openssl)" >&2
  exit 1
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
force=false
renew=false
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --force) force=true ;;
    --renew) renew=true ;;
    -h | --help) usage ;;
    -*) echo "error: unknown option $1" >&2; usage ;;
    *) [[ -z "$out" ]] || usage; out="$1" ;;
  esac
  shift
done
out="${out:-$here/out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
umask 077

san=""
for name in "${DNS_NAMES[@]}"; do san="${san:+$san, }DNS:$name"; done

# Own configuration files, so the result does not depend on the system's openssl.cnf.
cat >"$work/ca.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
x509_extensions = ca
[dn]
CN = $SERVICE-ca
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
cat >"$work/server.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
CN = ${DNS_NAMES[0]}
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF

run() {
  local log="$work/openssl.log"
  if ! openssl "$@" >"$log" 2>&1; then
    echo "error: openssl $1 failed:" >&2
    cat "$log" >&2
    exit 1
  fi
}

serial() { echo "0x$(openssl rand -hex 16)"; }

# The serving certificate is reusable when the CA signed it, it is a server certificate for every
# name, and it is valid for 30 more days.
serving_ok() {
  [[ -s "$out/tls.crt" && -s "$out/tls.key" ]] || return 1
  openssl x509 -in "$out/tls.crt" -noout -checkend $((30 * 24 * 3600)) >/dev/null 2>&1 || return 1
  for name in "${DNS_NAMES[@]}"; do
    openssl verify -CAfile "$out/ca.crt" -purpose sslserver -verify_hostname "$name" \
      "$out/tls.crt" >/dev/null 2>&1 || return 1
  done
  # The key belongs to the certificate.
  [[ "$(openssl x509 -in "$out/tls.crt" -noout -pubkey)" == "$(openssl pkey -in "$out/tls.key" -pubout)" ]]
}

if $force || [[ ! -s "$out/ca.crt" || ! -s "$out/ca.key" ]]; then
  echo "making a new CA: $out/ca.crt" >&2
  run req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 -set_serial "$(serial)" \
    -config "$work/ca.cnf" -keyout "$work/ca.key" -out "$work/ca.crt"
  mv "$work/ca.key" "$out/ca.key"
  mv "$work/ca.crt" "$out/ca.crt"
  rm -f "$out/tls.crt" "$out/tls.key"
fi

if ! $renew && serving_ok; then
  echo "keeping the serving certificate: $out/tls.crt" >&2
else
  echo "issuing a serving certificate for ${DNS_NAMES[*]}: $out/tls.crt" >&2
  run req -new -nodes -newkey rsa:2048 -sha256 -config "$work/server.cnf" \
    -keyout "$work/tls.key" -out "$work/tls.csr"
  run x509 -req -in "$work/tls.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -set_serial "$(serial)" \
    -days 365 -sha256 -extfile "$work/server.cnf" -extensions server -out "$work/tls.crt"
  mv "$work/tls.key" "$out/tls.key"
  mv "$work/tls.crt" "$out/tls.crt"
  serving_ok || { echo "error: the new serving certificate does not verify against $out/ca.crt" >&2; exit 1; }
fi
chmod 600 "$out/ca.key" "$out/tls.key"
chmod 644 "$out/ca.crt" "$out/tls.crt"

b64() { openssl base64 -A -in "$1"; }

# The Secret holds the key: written with the keys' permissions (umask 077).
cat >"$out/secret.yaml" <<EOF
# Generated by certs/generate.sh: the serving certificate the Deployment mounts.
apiVersion: v1
kind: Secret
metadata:
  name: $SECRET
  namespace: $NAMESPACE
  labels:
    app.kubernetes.io/name: $SERVICE
type: kubernetes.io/tls
data:
  tls.crt: $(b64 "$out/tls.crt")
  tls.key: $(b64 "$out/tls.key")
  ca.crt: $(b64 "$out/ca.crt")
EOF

chmod 600 "$out/secret.yaml"

# The registrations with kube-apiserver, each with the CA as its caBundle (the line keeps its
# indentation).
umask 022
for name in apiservice webhook guard-webhook; do
  template="$root/apiservice/$name.yaml"
  grep -q '^ *caBundle: ' "$template" || { echo "error: no caBundle line in $template" >&2; exit 1; }
  {
    echo "# Generated by certs/generate.sh from apiservice/$name.yaml, with the CA of $out/ca.crt."
    sed "s|^\( *\)caBundle: .*|\1caBundle: $(b64 "$out/ca.crt")|" "$template"
  } >"$out/$name.yaml"
done

cat <<EOF
Wrote $out/{ca.crt,ca.key,tls.crt,tls.key,secret.yaml,apiservice.yaml,webhook.yaml,guard-webhook.yaml}.
To install (after kubectl apply -k deploy/, which makes the namespace):

  kubectl apply -f $out/secret.yaml -f $out/apiservice.yaml -f $out/webhook.yaml
  kubectl get apiservice v1alpha1.live.ifo.kubevirt.io

With the maintenance guard (after kubectl apply -k apiservice/with-guard/ instead of deploy/):

  kubectl apply -f $out/guard-webhook.yaml
EOF
