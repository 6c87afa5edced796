package scheduler

import "github.com/gpushare/gpushare/pkg/placement"

// InspectResult is the JSON of GET /gpushare-scheduler/inspect.
type InspectResult struct {
	// Unit labels the units of every quantity (e.g. "GiB").
	Unit string `json:"unit"`
	// Nodes are the GPU-sharing nodes, sorted by name.
	Nodes []*placement.NodeInfo `json:"nodes"`
}

// Inspect lists the nodes that have GPUs or hold gpu-mem.
func Inspect(nodes []*placement.NodeInfo, unit string) InspectResult {
	out := InspectResult{Unit: unit, Nodes: []*placement.NodeInfo{}}
	for _, n := range nodes {
		if n.SharesGPUs() {
			out.Nodes = append(out.Nodes, n)
		}
	}
	return out
}
