package sim

import (
	"fmt"
	"io"
)

// KubeSchedulerName is the policy column of the runs of kube-scheduler alone (DRANodeKube).
const KubeSchedulerName = "kube-scheduler"

// DRAComparison is a DRA variant's allocation less that of the runs without DRA ("full": the
// policy chooses node and card) on the same seeds: the mean and sd over seeds of the paired
// differences, in points of GPU capacity.
type DRAComparison struct {
	// Against is the policy of the runs compared with.
	Against    string `json:"against"`
	AllocAt100 Stat   `json:"alloc_at_100"`
	AllocAt130 Stat   `json:"alloc_at_130"`
}

// markDRA labels s as the runs under variant v (nil: off).
func (s *Summary) markDRA(v *DRA) {
	s.DRA, s.dra = v.String(), v
	if v != nil && v.Node == DRANodeKube {
		s.Policy = KubeSchedulerName
	}
}

// compareWithFull sets VsFull on every DRA variant's summary for which the runs without DRA
// of its policy are among sums; kube-scheduler's are compared with the first policy's. runs
// are the results of each summary, in sums' order.
func compareWithFull(sums []*Summary, runs [][]*Result) {
	full := map[string]int{}
	first := -1
	for i, s := range sums {
		if s.DRA == DRAOff {
			full[s.Policy] = i
			if first < 0 {
				first = i
			}
		}
	}
	for i, s := range sums {
		j, ok := full[s.Policy]
		if s.Policy == KubeSchedulerName {
			j, ok = first, first >= 0
		}
		if s.DRA == DRAOff || !ok {
			continue
		}
		s.VsFull = &DRAComparison{Against: sums[j].Policy,
			AllocAt100: pairedDifference(runs[i], runs[j], 100), AllocAt130: pairedDifference(runs[i], runs[j], 130)}
	}
}

// pairedDifference is the mean and sd over seeds of a's allocation less b's at arrived %
// arrived; a and b are runs of the same seeds in the same order.
func pairedDifference(a, b []*Result, arrived int) Stat {
	diffs := make([]float64, min(len(a), len(b)))
	for k := range diffs {
		diffs[k] = a[k].AllocAt(arrived) - b[k].AllocAt(arrived)
	}
	return statOfValues(diffs)
}

// anyDRA reports whether sums are runs with --dra.
func anyDRA(sums []*Summary) bool {
	for _, s := range sums {
		if s.DRA != "" {
			return true
		}
	}
	return false
}

// writeDRAMarkdown prints the summaries of runs with --dra as a Markdown table: who chose the
// node and the card, the allocation, and its paired difference to the runs without DRA.
func writeDRAMarkdown(w io.Writer, sums []*Summary) error {
	if _, err := fmt.Fprintf(w, "#### %s under DRA (%d seeds)\n\n"+
		"| `--dra` | node chosen by | card chosen by | alloc@100 %% (mean ± sd) | vs full, paired | alloc@130 %% | vs full, paired | s/run |\n"+
		"|---|---|---|---|---|---|---|---|\n", sums[0].Trace, len(sums[0].Seeds)); err != nil {
		return err
	}
	for _, s := range sums {
		node, card := draChoosers(s)
		vs100, vs130 := "—", "—" // the runs compared with, or none to compare with
		if c := s.VsFull; c != nil {
			vs100 = fmt.Sprintf("%+.2f ± %.2f", c.AllocAt100.Mean, c.AllocAt100.SD)
			vs130 = fmt.Sprintf("%+.2f ± %.2f", c.AllocAt130.Mean, c.AllocAt130.SD)
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %s | %.2f ± %.2f | %s | %.2f ± %.2f | %s | %.2f |\n", s.DRA, node, card,
			s.AllocAt100.Mean, s.AllocAt100.SD, vs100, s.AllocAt130.Mean, s.AllocAt130.SD, vs130, s.Seconds); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// draChoosers says in words who chose the node and the card in s's runs.
func draChoosers(s *Summary) (node, card string) {
	v := s.dra
	if v == nil {
		return "`" + s.Policy + "`", "`" + s.Policy + "` (full: the extender binds)"
	}
	card = "allocator: first-fit, `" + string(v.Order) + "` order"
	switch v.Node {
	case DRANodeNaive:
		return "`" + s.Policy + "`, rating its own card", card
	case DRANodeKube:
		return "kube-scheduler alone (LeastAllocated + BalancedAllocation)", card
	}
	return "`" + s.Policy + "`, predicting the allocator's card", card
}
