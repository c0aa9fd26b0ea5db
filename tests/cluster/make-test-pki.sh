#!/bin/sh
# Makes a throwaway PKI for tests against the Kubernetes API double, with the openssl CLI:
#   OUTDIR/ca.pem, ca.key          a self-signed test CA
#   OUTDIR/server.pem, server.key  the API server's certificate (127.0.0.1, ::1, localhost)
#   OUTDIR/client.pem, client.key  a client certificate, CN=CLIENT_CN (default devlet-test)
# Usage: make-test-pki.sh OUTDIR [CLIENT_CN]
set -eu
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [CLIENT_CN]" >&2; exit 2; }
out=$1
cn=${2:-devlet-test}
mkdir -p "$out"
cd "$out"
umask 077
quiet() { "$@" >/dev/null 2>&1 || { echo "$0: failed: $*" >&2; "$@"; exit 1; }; }
quiet openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout ca.key -out ca.pem -subj "/CN=kube-api-double test CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
cat > server.ext <<'EXT'
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost,DNS:kubernetes.default.svc
EXT
quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout server.key -out server.csr -subj "/CN=kube-apiserver"
quiet openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile server.ext -out server.pem
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' > client.ext
quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout client.key -out client.csr -subj "/CN=$cn"
quiet openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile client.ext -out client.pem
rm -f server.csr client.csr server.ext client.ext ca.srl
chmod 644 ca.pem server.pem client.pem
