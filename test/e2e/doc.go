// Package e2e holds the real-cluster end-to-end tests of gpushare: etcd, kube-apiserver and
// kube-scheduler built from pinned sources by hack/e2e-bins.sh, the extender as a process and
// fake GPU nodes kept Ready by kwok. Run them with `make e2e`.
package e2e
