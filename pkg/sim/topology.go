package sim

import (
	"slices"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// The card topologies of Config.Topology.
const (
	// TopologyNone: the nodes have no topology (openb has none), as before it was reported.
	TopologyNone = "none"
	// TopologySynthetic: each node gets SyntheticLinks, published in its inventory annotation
	// as a share-plugin that reports topology publishes it, so placement sees it.
	TopologySynthetic = "synthetic"
	// TopologySyntheticBlind: the nodes get SyntheticLinks for the report (Result.MultiCard),
	// but their annotations leave them out: placement without topology, measured against it.
	TopologySyntheticBlind = "synthetic-blind"
)

// Synthetic links (synthetic topologies are deterministic; see SyntheticLinks).
const (
	syntheticNVSwitch = 12 // NVLink links of a card to an NVSwitch (NV12, A100 HGX)
	syntheticNVPair   = 4  // NVLink links between the two cards of a pair (NV4)
)

// SyntheticLinks is a made-up link matrix for the trace's node at index i (openb has none),
// links[a][b] between its cards a and b, chosen by i mod 3 so that every node size gets each
// kind. Cards are on two CPU sockets, the first half of the cards (rounded up) on the first:
//
//	i mod 3 = 0  an NVSwitch box: every two cards NV12
//	i mod 3 = 1  a PCIe box: cards 2k and 2k+1 of one socket behind one switch (PIX), other
//	             cards of a socket NODE, across sockets SYS
//	i mod 3 = 2  NVLinked pairs: cards 2k and 2k+1 NV4, other cards of a socket PHB, across
//	             sockets SYS
//
// A 2-card PCIe box thus has its cards on two sockets (SYS); a 1-card node has no links.
func SyntheticLinks(i int, n *Node) [][]contract.Link {
	if n.GPUs < 2 {
		return nil
	}
	links := make([][]contract.Link, n.GPUs)
	for a := range links {
		links[a] = make([]contract.Link, n.GPUs)
		for b := range links[a] {
			links[a][b] = syntheticLink(i%3, a, b, n.GPUs)
		}
	}
	return links
}

// syntheticLink is what joins cards a and b of a node of kind (SyntheticLinks) with cards
// cards.
func syntheticLink(kind, a, b, cards int) contract.Link {
	sameSocket := socketOf(a, cards) == socketOf(b, cards)
	pair := a/2 == b/2 && sameSocket
	switch {
	case kind == 0:
		return contract.NVLinkOf(syntheticNVSwitch)
	case !sameSocket:
		return contract.LinkSYS
	case kind == 1 && pair:
		return contract.LinkPIX
	case kind == 1:
		return contract.LinkNODE
	case pair:
		return contract.NVLinkOf(syntheticNVPair)
	}
	return contract.LinkPHB
}

// socketOf is the CPU socket of card a of a node of cards cards: the first half (rounded up)
// is on socket 0.
func socketOf(a, cards int) int {
	if a < (cards+1)/2 {
		return 0
	}
	return 1
}

// WithSyntheticTopology returns a copy of nodes, each with its SyntheticLinks.
func WithSyntheticTopology(nodes []Node) []Node {
	out := slices.Clone(nodes)
	for i := range out {
		out[i].Links = SyntheticLinks(i, &out[i])
	}
	return out
}

// placementTopology is links as placement weighs them (pair scores), nil without links.
func placementTopology(links [][]contract.Link) *placement.Topology {
	if len(links) == 0 {
		return nil
	}
	return placement.NewTopology(len(links), func(a, b int) int { return links[a][b].Score() })
}
