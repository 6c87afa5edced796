#!/usr/bin/env bash
# Makes the certificates of the extender's mutual TLS with openssl (docs/security.md):
#   ca.crt/ca.key          a CA that signs both sides (keep ca.key offline)
#   server.crt/server.key  the extender's serving certificate, for its Service's DNS names
#                          (also the client certificate a follower forwards to the leader with)
#   client.crt/client.key  kube-scheduler's client certificate
#   hold.key               32 random bytes: the key the extender replicas sign their preemption
#                          holds with (--hold-key-file)
# and prints the kubectl commands that store them where the shipped manifests look.
# Usage: hack/extender-certs.sh DIR [NAMESPACE] [DAYS]
set -euo pipefail
dir=${1:?usage: $0 DIR [NAMESPACE] [DAYS]}
ns=${2:-kube-system}
days=${3:-365}
svc=gpushare-extender
mkdir -p "$dir"
cd "$dir"
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
	-subj "/CN=gpushare-extender-ca" -keyout ca.key -out ca.crt 2>/dev/null
sign() { # name subject extensions
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
	openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
		-extfile <(printf '%s\n' "$3") -out "$1.crt" 2>/dev/null
	rm -f "$1.csr"
}
sign server "/CN=$svc" "subjectAltName=DNS:$svc,DNS:$svc.$ns,DNS:$svc.$ns.svc,DNS:$svc.$ns.svc.cluster.local
extendedKeyUsage=serverAuth,clientAuth"
sign client "/CN=kube-scheduler" "extendedKeyUsage=clientAuth"
head -c 32 /dev/urandom >hold.key
cat <<MSG
Certificates written to $dir. Store them:
  # the extender: serving certificate, and the CA its clients' certificates must chain to
  kubectl -n $ns create secret generic gpushare-extender-tls \\
    --from-file=tls.crt=$dir/server.crt --from-file=tls.key=$dir/server.key --from-file=ca.crt=$dir/ca.crt
  # the extender replicas' key for preemption holds (--hold-key-file)
  kubectl -n $ns create secret generic gpushare-extender-hold-key --from-file=hold.key=$dir/hold.key
  # the cluster's kube-scheduler (config/scheduler-config.yaml): on every control-plane host
  install -m 0600 -D $dir/client.crt /etc/kubernetes/gpushare/client.crt
  install -m 0600 -D $dir/client.key /etc/kubernetes/gpushare/client.key
  install -m 0644 -D $dir/ca.crt /etc/kubernetes/gpushare/ca.crt
  # or the second scheduler (config/second-scheduler/second-scheduler.yaml)
  kubectl -n $ns create secret generic gpushare-scheduler-client-tls \\
    --from-file=tls.crt=$dir/client.crt --from-file=tls.key=$dir/client.key --from-file=ca.crt=$dir/ca.crt
MSG
