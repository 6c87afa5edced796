//go:build tools

// Package tools pins containerd v2 (the daemon and its runc shim), built by hack/e2e-bins.sh
// for the real-node tests that need CDI; it is its own module so that containerd's dependency
// versions stay out of the Kubernetes graph in test/e2e.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
)
