package contract

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The node's card topology travels in the inventory annotation, per card (GPU.NUMA, GPU.Links),
// so that readers older than these fields ignore them. GPU.Links is the card's row of the
// node's link matrix, as nvidia-smi topo -m prints it: one token per card of the inventory in
// index order, "X" for the card itself, and for every other card what joins the two:
//
//	NV<n>  n NVLink links (NVSwitch systems report their links to the switch)
//	PIX    at most one PCIe switch between them
//	PXB    several PCIe switches, no host bridge
//	PHB    a PCIe host bridge (the CPU's root complex)
//	NODE   several host bridges within one NUMA node
//	SYS    across NUMA nodes (the CPUs' interconnect)
//
// TopologyVersion is the grammar's version; a reader meets a token it does not know as SYS,
// the weakest link, so a newer plugin never makes an older extender overrate a set of cards.

// TopologyVersion is the version of GPU.Links' grammar (GPU.TopologyVersion).
const TopologyVersion = 1

// MaxNVLinks bounds a link token's NVLink count (NV18 is the most any card had in 2026).
const MaxNVLinks = 64

// Link is what joins two cards, ordered from weakest to strongest: Score compares them.
type Link int

// The link kinds, weakest first; an NVLink of n links is LinkNVLink + n - 1.
const (
	// LinkSYS: across NUMA nodes, or unknown.
	LinkSYS Link = iota
	// LinkNODE: several host bridges within one NUMA node.
	LinkNODE
	// LinkPHB: one PCIe host bridge.
	LinkPHB
	// LinkPXB: several PCIe switches, no host bridge.
	LinkPXB
	// LinkPIX: at most one PCIe switch.
	LinkPIX
	// LinkNVLink: one NVLink link; n links are LinkNVLink + n - 1.
	LinkNVLink
)

var pcieTokens = [...]string{LinkSYS: "SYS", LinkNODE: "NODE", LinkPHB: "PHB", LinkPXB: "PXB", LinkPIX: "PIX"}

// NVLinks is the NVLink count of l (0 for PCIe and SYS links).
func (l Link) NVLinks() int {
	if l < LinkNVLink {
		return 0
	}
	return int(l-LinkNVLink) + 1
}

// NVLinkOf is the link of n NVLink links (n >= 1).
func NVLinkOf(n int) Link { return LinkNVLink + Link(n-1) }

// String is the link's token.
func (l Link) String() string {
	if n := l.NVLinks(); n > 0 {
		return "NV" + strconv.Itoa(n)
	}
	if l >= 0 && int(l) < len(pcieTokens) {
		return pcieTokens[l]
	}
	return "SYS"
}

// Score ranks links as HAMi does, so that a set's sum compares sets: across sockets 10, same
// socket 20, host bridge 30, several switches 40, one switch 50, and 100 per NVLink link.
func (l Link) Score() int {
	if n := l.NVLinks(); n > 0 {
		return 100 * n
	}
	return 10 * (int(l) + 1)
}

// ParseLink reads a token; one it does not know is SYS (see TopologyVersion).
func ParseLink(tok string) Link {
	if rest, ok := strings.CutPrefix(tok, "NV"); ok {
		if n, err := strconv.Atoi(rest); err == nil && n >= 1 && n <= MaxNVLinks {
			return NVLinkOf(n)
		}
		return LinkSYS
	}
	for l, t := range pcieTokens {
		if t == tok {
			return Link(l)
		}
	}
	return LinkSYS
}

// Topology is a node's link matrix: Link(i, j) between the cards at positions i and j of the
// node's inventory (sorted by index).
type Topology struct {
	n     int
	links []Link
}

// ErrInvalidTopology: a node's links do not form a matrix over its cards. The node's cards are
// still used, without topology.
var ErrInvalidTopology = errors.New("invalid GPU topology in the node's inventory")

// TopologyOf reads the link matrix of an inventory (DecodeGPUs' result): nil, nil when no card
// carries links (a plugin older than them, or one that could not read them). Every card must
// carry one token per card, "X" on the diagonal, and the matrix must be symmetric.
func TopologyOf(gpus []GPU) (*Topology, error) {
	has := false
	for _, g := range gpus {
		has = has || g.Links != ""
	}
	if !has {
		return nil, nil //nolint:nilnil // no topology is not an error
	}
	t := &Topology{n: len(gpus), links: make([]Link, len(gpus)*len(gpus))}
	for i, g := range gpus {
		if g.TopologyVersion > TopologyVersion {
			return nil, fmt.Errorf("%w: GPU %d's topology version %d is newer than %d", ErrInvalidTopology, g.Index, g.TopologyVersion, TopologyVersion)
		}
		toks := strings.Fields(g.Links)
		if len(toks) != len(gpus) {
			return nil, fmt.Errorf("%w: GPU %d has %d links for %d cards", ErrInvalidTopology, g.Index, len(toks), len(gpus))
		}
		for j, tok := range toks {
			if (i == j) != (tok == "X") {
				return nil, fmt.Errorf("%w: GPU %d's link %d is %q", ErrInvalidTopology, g.Index, j, tok)
			}
			if i != j {
				t.links[i*t.n+j] = ParseLink(tok)
			}
		}
	}
	for i := range t.n {
		for j := range i {
			if t.links[i*t.n+j] != t.links[j*t.n+i] {
				return nil, fmt.Errorf("%w: cards %d and %d disagree on their link (%v, %v)", ErrInvalidTopology, gpus[i].Index, gpus[j].Index, t.links[i*t.n+j], t.links[j*t.n+i])
			}
		}
	}
	return t, nil
}

// Cards is how many cards the matrix covers.
func (t *Topology) Cards() int { return t.n }

// Link is what joins the cards at positions i and j (i != j).
func (t *Topology) Link(i, j int) Link { return t.links[i*t.n+j] }

// SetScore sums the scores of every pair of the cards at positions set.
func (t *Topology) SetScore(set []int) int {
	s := 0
	for a, ca := range set {
		for _, cb := range set[:a] {
			s += t.Link(ca, cb).Score()
		}
	}
	return s
}

// EncodeLinks renders card i's row of a link matrix given as links[i][j] (the diagonal is
// ignored), for GPU.Links.
func EncodeLinks(links [][]Link, i int) string {
	toks := make([]string, len(links[i]))
	for j, l := range links[i] {
		if i == j {
			toks[j] = "X"
			continue
		}
		toks[j] = l.String()
	}
	return strings.Join(toks, " ")
}
