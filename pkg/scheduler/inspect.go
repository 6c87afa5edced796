package scheduler

import "github.com/gpushare/gpushare/pkg/cache"

// InspectResult is the JSON of GET /gpushare-scheduler/inspect.
type InspectResult struct {
	// Unit labels the units of every quantity (e.g. "GiB").
	Unit string `json:"unit"`
	// Nodes are the GPU-sharing nodes, sorted by name.
	Nodes []*cache.NodeInfo `json:"nodes"`
}

// Inspect lists the nodes that have GPUs or hold gpu-mem.
func Inspect(nodes []*cache.NodeInfo, unit string) InspectResult {
	out := InspectResult{Unit: unit, Nodes: []*cache.NodeInfo{}}
	for _, n := range nodes {
		if n.SharesGPUs() {
			out.Nodes = append(out.Nodes, n)
		}
	}
	return out
}
