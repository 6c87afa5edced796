package scheduler

import (
	"math/rand/v2"
	"sync"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// Seeded is an optional Policy extension for randomised policies: Seed restarts their random
// stream, so that a simulation is reproducible.
type Seeded interface {
	Seed(seed uint64)
}

// random places pods on a uniformly random feasible node and card (the paper's Random-fit
// baseline). Safe for concurrent use.
type random struct {
	mu  sync.Mutex // guards rng
	rng *rand.Rand
}

func newRandom(seed uint64) *random { return &random{rng: rand.New(rand.NewPCG(seed, seed))} }

func (r *random) Name() string { return "random" }

func (r *random) Seed(seed uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rng = rand.New(rand.NewPCG(seed, seed))
}

func (r *random) draw() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Float64()
}

func (r *random) RankGPU(*cache.NodeInfo, int, int64, *contract.PodRequest) float64 { return r.draw() }

func (r *random) ScoreNode(*cache.NodeInfo, *Plan, *contract.PodRequest) float64 { return r.draw() }
