package testing

import "github.com/gpushare/gpushare/pkg/placement"

// Link scores of NVLinkedPairs (contract.Link.Score).
const (
	pairScore   = 400 // NV4
	socketScore = 30  // PHB
	acrossScore = 10  // SYS
)

// NVLinkedPairs is the topology of cards NVLinked in pairs (NV4 between cards 2k and 2k+1)
// on two CPU sockets, the first half of the cards on the first (PHB within a socket, SYS
// across).
func NVLinkedPairs(cards int) *placement.Topology {
	socket := func(g int) int { return 2 * g / max(cards, 1) }
	return placement.NewTopology(cards, func(i, j int) int {
		switch {
		case i/2 == j/2 && socket(i) == socket(j):
			return pairScore
		case socket(i) == socket(j):
			return socketScore
		}
		return acrossScore
	})
}

// WithTopology gives every node of nodes with two cards or more the NVLinkedPairs topology of
// its cards, one shared by the nodes of a size, as the cache shares one between a node's
// snapshots.
func WithTopology(nodes []*placement.NodeInfo) {
	bySize := map[int]*placement.Topology{}
	for _, n := range nodes {
		cards := len(n.GPUs)
		if cards < 2 {
			continue
		}
		if bySize[cards] == nil {
			bySize[cards] = NVLinkedPairs(cards)
		}
		n.Topology = bySize[cards]
	}
}
