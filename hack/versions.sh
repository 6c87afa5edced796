# Pinned versions of the real-cluster pieces; sourced by hack/*.sh and read by test/e2e.
# v1.37.2 is not used: its module zip is not served by the proxy here.
K8S_VERSION=${K8S_VERSION:-v1.37.1}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
