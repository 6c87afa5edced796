package placement

import (
	"math/rand/v2"
	"sync"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

var (
	_ Policy = (*Random)(nil)
	_ Seeded = (*Random)(nil)
)

// Random places pods on a uniformly random feasible node and card (the paper's Random-fit
// baseline). Safe for concurrent use.
type Random struct {
	mu  sync.Mutex // guards rng
	rng *rand.Rand
}

// NewRandom returns a Random policy seeded with seed.
func NewRandom(seed uint64) *Random { return &Random{rng: rand.New(rand.NewPCG(seed, seed))} }

// RandomName names Random in the policy registry and in --policy.
const RandomName = "random"

// Name is RandomName.
func (r *Random) Name() string { return RandomName }

// Seed restarts the random stream.
func (r *Random) Seed(seed uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rng = rand.New(rand.NewPCG(seed, seed))
}

func (r *Random) draw() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Float64()
}

// ForPod returns the policy itself; its draws are guarded by its lock.
func (r *Random) ForPod(PodResources) Scorer { return r }

// RankGPU is a random draw.
func (r *Random) RankGPU(*NodeInfo, int, int64, *gpumem.PodRequest) float64 { return r.draw() }

// ScoreNode is a random draw.
func (r *Random) ScoreNode(*NodeInfo, *Plan, *gpumem.PodRequest) float64 { return r.draw() }
