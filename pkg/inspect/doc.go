// Package inspect implements `kubectl inspect gpushare`: it lists the GPU-sharing nodes and pods
// from the API server, feeds them to the extender's own accounting (pkg/cache) so that the CLI
// and the extender never disagree, and prints the result as a table, per-node details, or a
// versioned JSON/YAML document (see docs/inspect.md).
package inspect
