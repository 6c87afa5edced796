package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the summaries for people.
func WriteTable(w io.Writer, sums []*Summary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	// The tabwriter buffers every line until Flush, whose error is the underlying writer's.
	_, _ = fmt.Fprintln(tw, "policy\ttrace\tseeds\talloc@100 %\tsd\talloc@130 %\tsd\tunalloc GPUs@100\tpods\ts/run\t")
	for _, s := range sums {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t%.2f\t\n", s.Policy, s.Trace, len(s.Seeds),
			s.AllocAt100.Mean, s.AllocAt100.SD, s.AllocAt130.Mean, s.AllocAt130.SD, s.UnallocatedGPUsAt100, s.PodsSubmitted, s.Seconds)
	}
	return tw.Flush()
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
