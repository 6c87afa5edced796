package fgd

import (
	"math"
	"slices"
)

// sigmoidSteps are the breakpoints of FGD's integer score, ascending: the score of delta is
// 99 minus the number of steps below it (steps[i] = 1000*ln(100/(99-i) - 1)).
type sigmoidSteps [99]float64

func newSigmoidSteps() *sigmoidSteps {
	var s sigmoidSteps
	for i := range s {
		s[i] = 1000 * math.Log(100/float64(99-i)-1)
	}
	return &s
}

// score is FGD's integer node score for a fragmentation change delta in milli-GPU,
// floor(100 * sigmoid(-delta/1000)), found by binary search; within 1e-6 of a breakpoint the
// formula itself decides, so the result equals the formula's.
func (s *sigmoidSteps) score(delta float64) float64 {
	i, _ := slices.BinarySearch(s[:], delta)
	near := (i < len(s) && s[i]-delta < 1e-6) || (i > 0 && delta-s[i-1] < 1e-6)
	if near || i == 0 { // below the lowest step the float formula can reach 100
		return sigmoidScore(delta)
	}
	return float64(99 - i)
}

// sigmoidScore is floor(100 * sigmoid(-delta/1000)).
func sigmoidScore(delta float64) float64 {
	return math.Floor(100 / (1 + math.Exp(delta/1000)))
}
