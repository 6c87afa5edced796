package sim

import "math/rand/v2"

// newRand is the simulator's seeded random source: one per run, passed to whatever draws.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }
