// Package benchrun is what the commands of test/e2e/cmd share. Bench is the one runner of the
// benchmarks (bench-e2e, bench-replay, bench-scale): it registers their shared flags (Flags),
// parses the command line, checks it, makes the workspace (repository, pinned binaries, cluster
// folder, extender binary), runs the measurement under a context that SIGINT or SIGTERM cancels,
// prints the report (a table, then one JSON line) and removes what it made. Around it: Main and
// Logger (gpushare-local uses them too), a control plane with the command's namespace
// (StartCluster), the extender's flags (ExtenderArgs), GPU nodes that the extender's cache holds
// (AddGPUNodes, WaitCached), a pod watch (WatchPods) and Parallel. Each command keeps its own
// flags and measurement.
package benchrun
