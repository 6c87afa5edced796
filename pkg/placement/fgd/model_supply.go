package fgd

import "github.com/gpushare/gpushare/pkg/placement"

// modelSupply tracks the cluster's healthy GPU units per card model, from the nodes the policy
// has scored or been handed by SyncNodes, and derives how hard model-constrained task types press on the models they
// accept. Not safe for concurrent use (fragViews guards it).
type modelSupply struct {
	byNode  map[string]map[string]int64 // node → model → units
	byModel map[string]int64
	total   int64
	version int

	// cached pressure for one distribution and supply version
	dist       *Distribution
	distAt     int
	pressureOf []float64
}

func newModelSupply() *modelSupply {
	return &modelSupply{byNode: map[string]map[string]int64{}, byModel: map[string]int64{}}
}

// set records node's cards, if they changed.
func (m *modelSupply) set(node *placement.NodeInfo) {
	now := map[string]int64{}
	for _, g := range node.GPUs {
		if g.Healthy {
			now[g.Model] += g.Capacity
		}
	}
	old := m.byNode[node.Name]
	if sameUnits(old, now) {
		return
	}
	for model, u := range old {
		m.byModel[model] -= u
		m.total -= u
	}
	for model, u := range now {
		m.byModel[model] += u
		m.total += u
	}
	m.byNode[node.Name] = now
	m.version++
}

// remove forgets a node's cards.
func (m *modelSupply) remove(name string) {
	old, ok := m.byNode[name]
	if !ok {
		return
	}
	for model, u := range old {
		m.byModel[model] -= u
		m.total -= u
	}
	delete(m.byNode, name)
	m.version++
}

func sameUnits(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// pressure returns, per group of d, how much the group's share of GPU demand exceeds the share
// of the supply it can use (demand share / supply share); 0 for unconstrained groups.
func (m *modelSupply) pressure(d *Distribution, models *modelMatcher) []float64 {
	if m.dist == d && m.distAt == m.version {
		return m.pressureOf
	}
	var demand float64
	for i := range d.groups {
		g := &d.groups[i]
		demand += g.all * float64(g.perGPU) * float64(g.gpus)
	}
	out := make([]float64, len(d.groups))
	for i := range d.groups {
		g := &d.groups[i]
		if g.models == "" || demand == 0 || m.total == 0 {
			continue
		}
		var usable int64
		for model, u := range m.byModel {
			if models.accepts(g.models, g.list, model) {
				usable += u
			}
		}
		if usable > 0 {
			share := g.all * float64(g.perGPU) * float64(g.gpus) / demand
			out[i] = share / (float64(usable) / float64(m.total))
		}
	}
	m.dist, m.distAt, m.pressureOf = d, m.version, out
	return out
}
