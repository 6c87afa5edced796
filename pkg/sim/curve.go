package sim

import "math"

// curveBuilder bins (arrived, allocated) events by integer arrived % of capacity, as the FGD
// paper's post-processing does (placement.md §4.9).
type curveBuilder struct {
	capacity float64
	sum      []float64
	count    []int
}

func newCurveBuilder(capacityMilli int64) *curveBuilder {
	return &curveBuilder{capacity: float64(capacityMilli)}
}

func (c *curveBuilder) add(arrived, used int64) {
	if c.capacity == 0 {
		return
	}
	bin := int(math.Round(float64(arrived) / c.capacity * 100))
	for len(c.sum) <= bin {
		c.sum, c.count = append(c.sum, 0), append(c.count, 0)
	}
	c.sum[bin] += float64(used) / c.capacity * 100
	c.count[bin]++
}

// build returns the mean allocation % per arrived %; a bin without events takes the mean of
// the events in the bins next to it.
func (c *curveBuilder) build() []float64 {
	out := make([]float64, len(c.sum))
	for b := range out {
		if c.count[b] > 0 {
			out[b] = c.sum[b] / float64(c.count[b])
			continue
		}
		s, n := 0.0, 0
		for _, nb := range []int{b - 1, b + 1} {
			if nb >= 0 && nb < len(c.sum) {
				s, n = s+c.sum[nb], n+c.count[nb]
			}
		}
		out[b] = math.NaN()
		if n > 0 {
			out[b] = s / float64(n)
		}
	}
	return out
}

func curveAt(curve []float64, a int) float64 {
	if a < 0 || a >= len(curve) {
		return math.NaN()
	}
	return curve[a]
}
