//go:build tools

// Package tools pins etcd's server, built by hack/e2e-bins.sh; it is its own module so that
// etcd's dependency versions stay out of the Kubernetes graph in test/e2e.
package tools

import _ "go.etcd.io/etcd/server/v3"
