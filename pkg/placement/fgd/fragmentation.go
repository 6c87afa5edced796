package fgd

import (
	"github.com/gpushare/gpushare/pkg/placement"
)

// fragView is a node prepared for FGD's fragmentation sums under one Distribution: the free
// units of each card (0 for unhealthy ones), the free CPU and, per task type, a bit mask of the
// cards whose model the type accepts. Cards past the 64th accept only unconstrained types.
type fragView struct {
	node  *placement.NodeInfo
	free  []int64
	cpu   int64
	masks []uint64
	// milliPerUnit converts units to milli-GPU, FGD's scale (1000 units = one card).
	milliPerUnit float64
	// idle is the sum of free; counts has, per group, the cards that fit the group's card
	// shape and the free units of the others (see groupFrag). With them the fragmentation
	// after a change to one card costs one step per group (fragOneCard).
	idle   int64
	counts []groupCount
	// class[c] is the first card identical to c for fragmentation (same free units, model
	// and health, and on the same side of the 64th card), c itself if none.
	class []int
}

// groupCount is a node's cards as one task group sees them.
type groupCount struct {
	mask uint64 // the cards whose model the group accepts
	fits int    // cards that fit the group's card shape
	rest int64  // free units of the other cards
}

// newFragView prepares node for d.
func newFragView(node *placement.NodeInfo, d *Distribution, models *modelMatcher) *fragView {
	v := &fragView{node: node, free: make([]int64, len(node.GPUs)), masks: make([]uint64, len(d.groups)),
		cpu: node.AllocatableMilliCPU - node.RequestedMilliCPU, milliPerUnit: 1}
	var capMax int64
	for g := range node.GPUs {
		if node.GPUs[g].Healthy {
			v.free[g] = node.GPUs[g].Free()
		}
		capMax = max(capMax, node.GPUs[g].Capacity)
	}
	if capMax > 0 {
		v.milliPerUnit = 1000 / float64(capMax)
	}
	v.class = make([]int, len(node.GPUs))
	for c := range node.GPUs {
		v.class[c] = c
		for h := range c {
			if v.free[h] == v.free[c] && (h < 64) == (c < 64) && node.GPUs[h].Model == node.GPUs[c].Model &&
				node.GPUs[h].Healthy == node.GPUs[c].Healthy {
				v.class[c] = h
				break
			}
		}
	}
	v.counts = make([]groupCount, len(d.groups))
	for _, f := range v.free {
		v.idle += f
	}
	for i := range d.groups {
		g, gc := &d.groups[i], &v.counts[i]
		v.masks[i] = models.mask(node, g.models, g.list)
		gc.mask = v.masks[i]
		for c, f := range v.free {
			if fitsShape(c, f, gc.mask, g) {
				gc.fits++
			} else {
				gc.rest += f
			}
		}
	}
	return v
}

// Fragmentation is FGD's expected fragmentation of node under d, in units (placement.md §2.2-2.3):
// for each task type, the idle units the type cannot use, weighted by its popularity.
func Fragmentation(node *placement.NodeInfo, d *Distribution) float64 {
	v := newFragView(node, d, newModelMatcher())
	return v.frag(d, v.free, v.cpu, nil)
}

// frag is the node's fragmentation with the given free units per card and free CPU. weights,
// when not nil, is d.groups[i].weightFitting(cpu) for each group i, already computed.
func (v *fragView) frag(d *Distribution, free []int64, cpu int64, weights []float64) float64 {
	var idle int64
	for _, f := range free {
		idle += f
	}
	total := d.cpuOnly * float64(idle)
	for i := range d.groups {
		g := &d.groups[i]
		all := g.all
		var fit float64
		if weights != nil {
			fit = weights[i]
		} else {
			fit = g.weightFitting(cpu)
		}
		if fit == 0 {
			total += all * float64(idle)
			continue
		}
		total += fit*float64(groupFrag(free, v.masks[i], g, idle)) + (all-fit)*float64(idle)
	}
	return total
}

// fragOneCard is frag(d, free, cpu) for free = v.free with units taken from card c, where
// weights[i] is d.groups[i].weightFitting(cpu). It sums the same terms in the same order as
// frag, so the result is the same float, but each group's term comes from the view's counts
// instead of a pass over the cards.
func (v *fragView) fragOneCard(d *Distribution, c int, units int64, weights []float64) float64 {
	before, after := v.free[c], v.free[c]-units
	var bit uint64
	if c < 64 {
		bit = 1 << c
	}
	idle := v.idle - units
	fidle := float64(idle)
	total := d.cpuOnly * fidle
	counts, weights := v.counts[:len(d.groups)], weights[:len(d.groups)]
	for i := range d.groups {
		g := &d.groups[i]
		fit := weights[i]
		if fit == 0 {
			total += g.all * fidle
			continue
		}
		gc := &counts[i]
		fits, rest := gc.fits, gc.rest
		accepts := gc.mask&bit != 0
		if accepts && before >= g.perGPU {
			fits--
		} else {
			rest -= before
		}
		if accepts && after >= g.perGPU {
			fits++
		} else {
			rest += after
		}
		if fits < g.gpus {
			rest = idle
		}
		total += fit*float64(rest) + (g.all-fit)*fidle
	}
	return total
}

// fitsShape reports whether card c with f free units fits the group's card shape.
func fitsShape(c int, f int64, mask uint64, g *typeGroup) bool {
	return c < 64 && mask&(1<<c) != 0 && f >= g.perGPU
}

// groupFrag is F_n(m) for the group's card shape: the free units of cards too small for it
// (or of another model) when enough cards fit it, else all idle units.
func groupFrag(free []int64, mask uint64, g *typeGroup, idle int64) int64 {
	fit, frag := 0, int64(0)
	for c, f := range free {
		if fitsShape(c, f, mask, g) {
			fit++
		} else {
			frag += f
		}
	}
	if fit < g.gpus {
		return idle
	}
	return frag
}
