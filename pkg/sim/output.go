package sim

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// WriteTable prints the summaries for people; with a topology, also how well connected the
// multi-card containers' cards are (multiCardColumns).
func WriteTable(w io.Writer, sums []*Summary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	topo, prio, dra := anyTopology(sums), anyPreemption(sums), anyDRA(sums)
	// The tabwriter buffers every line until Flush, whose error is the underlying writer's.
	_, _ = fmt.Fprint(tw, "policy\ttrace\tseeds\talloc@100 %\tsd\talloc@130 %\tsd\tunalloc GPUs@100\tpods\ts/run\t")
	if topo {
		_, _ = fmt.Fprint(tw, "topology\tmulti-card\ton best set %\tsd\ton best free set %\tsd\t")
	}
	if prio {
		_, _ = fmt.Fprint(tw, "preemption\tabove-BE alloc@100 %\tsd\tpreemptions\tpods preempted\tGPUs evicted\t")
	}
	if dra {
		_, _ = fmt.Fprint(tw, "dra\tvs full@100\tsd\tvs full@130\tsd\t")
	}
	_, _ = fmt.Fprintln(tw)
	for _, s := range sums {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t%.2f\t", s.Policy, s.Trace, len(s.Seeds),
			s.AllocAt100.Mean, s.AllocAt100.SD, s.AllocAt130.Mean, s.AllocAt130.SD, s.UnallocatedGPUsAt100, s.PodsSubmitted, s.Seconds)
		if topo {
			best, free := s.multiCardShares()
			_, _ = fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t", s.Topology, s.MultiCard, best.Mean, best.SD, free.Mean, free.SD)
		}
		if p := s.Preemption; p != nil {
			_, _ = fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t", onOff(p.On), p.HighAllocAt100.Mean, p.HighAllocAt100.SD,
				p.Preemptions, p.PodsPreempted, p.GPUsEvicted)
		}
		if dra {
			c := s.VsFull
			if c == nil {
				c = &DRAComparison{AllocAt100: Stat{Mean: math.NaN(), SD: math.NaN()}, AllocAt130: Stat{Mean: math.NaN(), SD: math.NaN()}}
			}
			_, _ = fmt.Fprintf(tw, "%s\t%+.2f\t%.2f\t%+.2f\t%.2f\t", s.DRA, c.AllocAt100.Mean, c.AllocAt100.SD, c.AllocAt130.Mean, c.AllocAt130.SD)
		}
		_, _ = fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// anyTopology reports whether a summary is of a run with a topology.
func anyTopology(sums []*Summary) bool {
	for _, s := range sums {
		if s.Topology != "" {
			return true
		}
	}
	return false
}

// anyPreemption reports whether a summary is of a run with priorities (--preemption).
func anyPreemption(sums []*Summary) bool {
	for _, s := range sums {
		if s.Preemption != nil {
			return true
		}
	}
	return false
}

// onOff is "on" or "off".
func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// multiCardShares are OnBestSet and OnBestFreeSet, NaN when absent.
func (s *Summary) multiCardShares() (best, free Stat) {
	nan := Stat{Mean: math.NaN(), SD: math.NaN()}
	best, free = nan, nan
	if s.OnBestSet != nil {
		best = *s.OnBestSet
	}
	if s.OnBestFreeSet != nil {
		free = *s.OnBestFreeSet
	}
	return best, free
}

// WriteCurves writes the curves as CSV: policy, trace, arrived %, mean and sd of allocated %.
func WriteCurves(w io.Writer, sums []*Summary) error {
	if _, err := fmt.Fprintln(w, "policy,trace,arrived_pct,alloc_pct,alloc_sd"); err != nil {
		return err
	}
	for _, s := range sums {
		for a, st := range s.Curve() {
			if _, err := fmt.Fprintf(w, "%s,%s,%d,%.3f,%.3f\n", s.Policy, s.Trace, a, st.Mean, st.SD); err != nil {
				return err
			}
		}
	}
	return nil
}
