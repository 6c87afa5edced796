// Package benchrun is the start-up that the commands of test/e2e/cmd share (bench-e2e,
// bench-replay, bench-scale, gpushare-local): a main that stops on SIGINT or SIGTERM, their
// log lines, a control plane with the command's namespace, the extender's flags, and GPU nodes
// that the extender's cache holds. Each command keeps its own flags and measurements.
package benchrun
