package sim

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// TestMultiCardRecord: a two-card container counts as on its best set when no two cards of
// its node are better connected, and on its best free set when no two of the cards free for
// it are.
func TestMultiCardRecord(t *testing.T) {
	// Cards 0 and 1 under one host bridge, 2 and 3 NVLinked, across them SYS.
	links := [][]contract.Link{
		{contract.LinkSYS, contract.LinkPHB, contract.LinkSYS, contract.LinkSYS},
		{contract.LinkPHB, contract.LinkSYS, contract.LinkSYS, contract.LinkSYS},
		{contract.LinkSYS, contract.LinkSYS, contract.LinkSYS, contract.NVLinkOf(4)},
		{contract.LinkSYS, contract.LinkSYS, contract.NVLinkOf(4), contract.LinkSYS},
	}
	two := &gpumem.PodRequest{Containers: []gpumem.ContainerRequest{{Key: "0", Units: 2000, GPUs: 2}}}
	one := &gpumem.PodRequest{Containers: []gpumem.ContainerRequest{{Key: "0", Units: 1000, GPUs: 1}}}
	tests := []struct {
		name                   string
		used                   []int64
		req                    *gpumem.PodRequest
		alloc                  gpumem.Allocation
		wantBest, wantBestFree int
		wantContainers         int
	}{
		{name: "the NVLinked pair", used: []int64{0, 0, 0, 0}, req: two, alloc: gpumem.Allocation{"0": {2: 1000, 3: 1000}},
			wantBest: 1, wantBestFree: 1, wantContainers: 1},
		{name: "the PCIe pair while the NVLinked one is free", used: []int64{0, 0, 0, 0}, req: two,
			alloc: gpumem.Allocation{"0": {0: 1000, 1: 1000}}, wantContainers: 1},
		{name: "the PCIe pair once the NVLinked one is broken", used: []int64{0, 0, 0, 500}, req: two,
			alloc: gpumem.Allocation{"0": {0: 1000, 1: 1000}}, wantBestFree: 1, wantContainers: 1},
		{name: "one card is not measured", used: []int64{0, 0, 0, 0}, req: one, alloc: gpumem.Allocation{"0": {2: 1000}}},
		{name: "all the node's cards are not measured", used: []int64{0, 0, 0, 0},
			req:   &gpumem.PodRequest{Containers: []gpumem.ContainerRequest{{Key: "0", Units: 4000, GPUs: 4}}},
			alloc: gpumem.Allocation{"0": {0: 1000, 1: 1000, 2: 1000, 3: 1000}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []Node{{Name: "n", GPUs: 4, Links: links}}
			m := newMultiCard(nodes)
			node := &placement.NodeInfo{Name: "n"}
			for g, u := range tt.used {
				node.GPUs = append(node.GPUs, placement.GPUInfo{Index: g, Capacity: 1000, Used: u, Healthy: true})
			}
			node.Summarize()
			m.record(node, tt.req, tt.alloc)
			if m.containers != tt.wantContainers || m.onBest != tt.wantBest || m.onBestFree != tt.wantBestFree {
				t.Errorf("containers %d, on best set %d, on best free set %d; want %d, %d, %d",
					m.containers, m.onBest, m.onBestFree, tt.wantContainers, tt.wantBest, tt.wantBestFree)
			}
		})
	}
	if newMultiCard([]Node{{Name: "n", GPUs: 2}}) != nil {
		t.Error("nodes without links are measured")
	}
}
