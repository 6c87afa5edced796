// Package sim replays a GPU-sharing pod trace (Alibaba's openb CSVs) through the extender's own
// cache (pkg/cache) and decision pipeline (pkg/placement.Decision with a placement.Policy), following
// the protocol of the FGD paper (Weng et al., ATC'23): seeded shuffle, inflation to a multiple of
// the cluster's GPU capacity, one placement attempt per pod, and the allocation ratio measured
// against the arrived GPU request. docs/placement.md describes the method and the results.
package sim
