package fgd

import (
	"math"
	"slices"
)

// sigmoidSteps are the breakpoints of FGD's integer score: the score of delta is 99 minus the
// number of breakpoints below it.
type sigmoidSteps struct {
	// at is ascending: at[i] = 1000*ln(100/(99-i) - 1).
	at [99]float64
	// on[i] is the formula's score of at[i] itself. A change of exactly 0 is a breakpoint
	// (at[49]), and placing a pod often leaves a node's fragmentation as it was: kept here, that
	// common case costs no exponential.
	on [99]float64
}

func newSigmoidSteps() *sigmoidSteps {
	var s sigmoidSteps
	for i := range s.at {
		s.at[i] = 1000 * math.Log(100/float64(99-i)-1)
		s.on[i] = sigmoidScore(s.at[i])
	}
	return &s
}

// score is FGD's integer node score for a fragmentation change delta in milli-GPU,
// floor(100 * sigmoid(-delta/1000)), found by binary search; on a breakpoint it is the
// formula's value there, and within 1e-6 of one the formula itself decides, so the result
// equals the formula's.
func (s *sigmoidSteps) score(delta float64) float64 {
	i, found := slices.BinarySearch(s.at[:], delta)
	if found {
		return s.on[i]
	}
	near := (i < len(s.at) && s.at[i]-delta < 1e-6) || (i > 0 && delta-s.at[i-1] < 1e-6)
	if near || i == 0 { // below the lowest step the float formula can reach 100
		return sigmoidScore(delta)
	}
	return float64(99 - i)
}

// sigmoidScore is floor(100 * sigmoid(-delta/1000)).
func sigmoidScore(delta float64) float64 {
	return math.Floor(100 / (1 + math.Exp(delta/1000)))
}
