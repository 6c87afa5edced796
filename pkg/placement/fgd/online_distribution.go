package fgd

import (
	"math"
	"sync"
	"sync/atomic"
)

// Defaults of the learned distribution.
const (
	// learnHalfLife is the number of observed pods after which an observation weighs half.
	learnHalfLife = 5000
	// learnMaxShapes bounds the shapes remembered; the lightest goes when a new one comes.
	learnMaxShapes = 512
	// learnRefresh is the fewest observations between two recomputations of the typical set;
	// up to this many observations it is recomputed at the 1st, 2nd, 4th ... one.
	learnRefresh = 64
	// learnRefreshShare: from then on, the typical set is recomputed once the observations
	// since the last time reach 1/learnRefreshShare of those before it (counting at most
	// learnHalfLife of them), and at least learnRefresh. Each recomputation makes every node's
	// fragmentation be computed afresh; with thousands of pods counted, a few dozen more
	// barely move the typical set.
	learnRefreshShare = 4
)

// onlineDistribution learns the workload's task shapes from the pods it observes: decayed
// counts with bounded memory, turned into FGD's typical set now and then. Safe for concurrent
// use; readers get an immutable *Distribution without locking.
type onlineDistribution struct {
	mu     sync.Mutex // guards counts, inc and seen
	counts map[TaskShape]float64
	inc    float64 // weight of the next observation: decay is applied by growing it
	seen   int
	// published is seen when the typical set was last recomputed.
	published int
	grow      float64 // per-observation growth of inc, 2^(1/half-life)

	current atomic.Pointer[Distribution]
}

func newOnlineDistribution(halfLife float64) *onlineDistribution {
	o := &onlineDistribution{counts: map[TaskShape]float64{}, inc: 1, grow: math.Exp2(1 / halfLife)}
	o.current.Store(&Distribution{})
	return o
}

// observe counts one pod of shape s.
func (o *onlineDistribution) observe(s TaskShape) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inc *= o.grow
	o.counts[s] += o.inc
	if o.inc > 1e12 {
		o.rescaleLocked()
	}
	if len(o.counts) > learnMaxShapes {
		o.dropLightestLocked()
	}
	o.seen++
	if o.refreshDue() {
		o.publishLocked()
	}
}

// size returns the shapes remembered and the task types of the typical set readers see.
func (o *onlineDistribution) size() (shapes, typical int) {
	o.mu.Lock()
	shapes = len(o.counts)
	o.mu.Unlock()
	return shapes, len(o.current.Load().types)
}

// reset replaces what was learned with counts (each already weighted 1).
func (o *onlineDistribution) reset(counts map[TaskShape]float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts, o.inc, o.seen = counts, 1, 0
	for _, c := range counts {
		o.seen += int(c)
	}
	o.publishLocked()
}

// refreshDue reports whether the typical set is due to be recomputed (see learnRefresh and
// learnRefreshShare). Caller holds o.mu.
func (o *onlineDistribution) refreshDue() bool {
	if o.seen <= learnRefresh {
		return o.seen&(o.seen-1) == 0
	}
	return o.seen-o.published >= max(learnRefresh, min(o.published, learnHalfLife)/learnRefreshShare)
}

// publishLocked recomputes the typical set readers see. Caller holds o.mu.
func (o *onlineDistribution) publishLocked() {
	o.published = o.seen
	o.current.Store(TypicalDistribution(o.counts, DefaultCoverage))
}

// rescaleLocked divides all weights by inc. Caller holds o.mu.
func (o *onlineDistribution) rescaleLocked() {
	for s := range o.counts {
		o.counts[s] /= o.inc
	}
	o.inc = 1
}

// dropLightestLocked forgets the shape with the least weight. Caller holds o.mu.
func (o *onlineDistribution) dropLightestLocked() {
	var lightest TaskShape
	least := math.Inf(1)
	for s, c := range o.counts {
		if c < least || (c == least && comparePopularity(TaskType{TaskShape: s}, TaskType{TaskShape: lightest}) > 0) {
			lightest, least = s, c
		}
	}
	delete(o.counts, lightest)
}
