package sim

import (
	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// multiCard measures how well connected the cards of the run's multi-card containers are, on
// the nodes with links (Node.Links), whether placement saw the links or not.
type multiCard struct {
	topos map[string]*placement.Topology // by node name; nodes with links only
	// containers counts the placed containers on two cards or more, but fewer than all, of a
	// node with links (a container on all of them has no choice to make); onBest those whose
	// cards' SetScore is the best of any as many cards of the node, and onBestFree the best of
	// the cards that could take the container when it was placed.
	containers, onBest, onBestFree int
	all, fit                       []int // scratch
}

// newMultiCard measures on nodes' links; nil when no node has any.
func newMultiCard(nodes []Node) *multiCard {
	m := &multiCard{topos: map[string]*placement.Topology{}}
	for i := range nodes {
		if t := placementTopology(nodes[i].Links); t != nil {
			m.topos[nodes[i].Name] = t
		}
	}
	if len(m.topos) == 0 {
		return nil
	}
	return m
}

// record measures the multi-card containers of a pod placed with alloc on node, whose snapshot
// before the placement is node.
func (m *multiCard) record(node *placement.NodeInfo, req *gpumem.PodRequest, alloc gpumem.Allocation) {
	t := m.topos[node.Name]
	if t == nil || t.Cards() != len(node.GPUs) {
		return
	}
	for _, c := range req.Containers {
		if c.GPUs < 2 || c.GPUs >= len(node.GPUs) { // on all the node's cards, any placement is the best
			continue
		}
		var set []int
		for idx := range alloc[c.Key] {
			if g, ok := node.Position(idx); ok {
				set = append(set, g)
			}
		}
		m.all, m.fit = m.all[:0], m.fit[:0]
		for g := range node.GPUs {
			m.all = append(m.all, g)
			if node.CardFits(g, c.PerGPU(), req) {
				m.fit = append(m.fit, g)
			}
		}
		score := t.SetScore(set)
		_, best := t.BestSet(m.all, len(set))
		_, bestFree := t.BestSet(m.fit, len(set))
		m.containers++
		m.onBest += btoi(score >= best)
		m.onBestFree += btoi(score >= bestFree)
	}
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
