package inspect

import (
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// nodeTopology is what a node's inventory annotation says of its cards' topology.
type nodeTopology struct {
	// numa and links are each card's NUMA node and row of the link matrix, by card index.
	numa  map[int]*int
	links map[int]string
	// matrix is the node's link matrix; nil when the annotation has none (or a malformed one).
	matrix *contract.Topology
	// pos is each card's position in matrix, by card index.
	pos map[int]int
	// memory is each card's memory figures (total, reserved, usable), by card index.
	memory map[int]contract.GPU
}

// topologyOf reads the topology of node's inventory annotation.
func topologyOf(node *v1.Node, names *contract.Names) nodeTopology {
	t := nodeTopology{numa: map[int]*int{}, links: map[int]string{}, pos: map[int]int{}, memory: map[int]contract.GPU{}}
	gpus, err := contract.DecodeGPUs(node.Annotations[names.NodeGPUsAnnotation])
	if err != nil {
		return t
	}
	for i, g := range gpus {
		t.numa[g.Index], t.links[g.Index], t.pos[g.Index] = g.NUMA, g.Links, i
		t.memory[g.Index] = contract.GPU{MemoryBytes: g.MemoryBytes, ReservedBytes: g.ReservedBytes, UsableBytes: g.UsableBytes}
	}
	if m, err := contract.TopologyOf(gpus); err == nil {
		t.matrix = m
	}
	return t
}

// describe says what joins cards (sorted card indexes, two or more): "GPU0+GPU1 (NV4)";
// with three or more cards, one link when every pair has it, else each pair's
// ("GPU0+GPU1+GPU4 (GPU0-GPU1 NV4, GPU0-GPU4 SYS, GPU1-GPU4 SYS)"); "(unknown)" when the node
// publishes no topology.
func (t nodeTopology) describe(cards []int) string {
	names := make([]string, len(cards))
	for i, c := range cards {
		names[i] = "GPU" + strconv.Itoa(c)
	}
	set := strings.Join(names, "+")
	var pairs, links []string
	for a := range cards {
		for b := a + 1; b < len(cards); b++ {
			l, ok := t.link(cards[a], cards[b])
			if !ok {
				return set + " (unknown)"
			}
			pairs = append(pairs, names[a]+"-"+names[b]+" "+l)
			if !slices.Contains(links, l) {
				links = append(links, l)
			}
		}
	}
	if len(links) == 1 {
		return set + " (" + links[0] + ")"
	}
	return set + " (" + strings.Join(pairs, ", ") + ")"
}

// link is the token of what joins cards a and b.
func (t nodeTopology) link(a, b int) (string, bool) {
	pa, okA := t.pos[a]
	pb, okB := t.pos[b]
	if t.matrix == nil || !okA || !okB {
		return "", false
	}
	return t.matrix.Link(pa, pb).String(), true
}

// numaCell renders a card's NUMA node, "-" when unknown.
func numaCell(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}
