//go:build tools

// Package tools pins the linters that `make lint` and `make verify` build into bin/tools/:
// golangci-lint v2 and logcheck (the structured/contextual logging check). It is its own module
// so that the linters' dependency versions stay out of the project's graph and the project's out
// of theirs.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	_ "sigs.k8s.io/logtools/logcheck"
)
