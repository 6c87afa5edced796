//go:build tools

// Package tools pins the helm CLI that `make verify` builds into bin/tools/ to lint and render
// charts/gpushare.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
