#!/bin/sh
# Writes a kubeconfig for the Kubernetes API double (mode 0600):
#   write-kubeconfig.sh OUT SERVER_URL CA_PEM token TOKEN [NAMESPACE]
#   write-kubeconfig.sh OUT SERVER_URL CA_PEM token-file PATH [NAMESPACE]
#   write-kubeconfig.sh OUT SERVER_URL CA_PEM cert CLIENT_PEM CLIENT_KEY [NAMESPACE]
# The CA is referenced by path (certificate-authority), as devlet's docs show it.
set -eu
usage() { echo "usage: $0 OUT SERVER_URL CA_PEM token TOKEN|token-file PATH|cert PEM KEY [NAMESPACE]" >&2; exit 2; }
[ $# -ge 5 ] || usage
out=$1 server=$2 ca=$3 mode=$4
shift 4
case $mode in
    token) user="    token: $1"; shift ;;
    token-file) user="    tokenFile: $1"; shift ;;
    cert) [ $# -ge 2 ] || usage; user="    client-certificate: $1
    client-key: $2"; shift 2 ;;
    *) usage ;;
esac
ns=${1:-default}
umask 077
cat > "$out" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: double
  cluster:
    server: $server
    certificate-authority: $ca
users:
- name: double-user
  user:
$user
contexts:
- name: double
  context:
    cluster: double
    user: double-user
    namespace: $ns
current-context: double
KUBECONFIG
