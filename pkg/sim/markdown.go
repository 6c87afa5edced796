package sim

import (
	"fmt"
	"io"
	"math"
)

// paperFGD is FGD's published allocation at arrived = 100% per openb trace (10-seed means,
// placement.md §5 of the shared notes; from the authors' cached results).
func paperFGD() map[string]float64 {
	return map[string]float64{"default": 95.23, "gpushare100": 86.64, "multigpu50": 97.09, "gpushare40": 93.96, "gpuspec33": 87.84}
}

// WriteMarkdown prints the summaries as a Markdown table with the paper's FGD figure for the
// trace and each policy's difference to it.
func WriteMarkdown(w io.Writer, sums []*Summary) error {
	if len(sums) == 0 {
		return nil
	}
	paper, ok := paperFGD()[sums[0].Trace]
	if !ok {
		paper = math.NaN()
	}
	if anyTopology(sums) {
		return writeTopologyMarkdown(w, sums)
	}
	if anyDRA(sums) {
		return writeDRAMarkdown(w, sums)
	}
	if anyPreemption(sums) {
		return writePreemptionMarkdown(w, sums)
	}
	if _, err := fmt.Fprintf(w, "#### %s (%d seeds; paper's FGD alloc@100: %.2f%%)\n\n"+
		"| policy | alloc@100 %% (mean ± sd) | vs paper FGD | alloc@130 %% | unallocated GPUs @100 | pods | s/run |\n"+
		"|---|---|---|---|---|---|---|\n", sums[0].Trace, len(sums[0].Seeds), paper); err != nil {
		return err
	}
	for _, s := range sums {
		if _, err := fmt.Fprintf(w, "| %s | %.2f ± %.2f | %+.2f | %.2f ± %.2f | %.0f | %d | %.2f |\n", s.Policy,
			s.AllocAt100.Mean, s.AllocAt100.SD, s.AllocAt100.Mean-paper, s.AllocAt130.Mean, s.AllocAt130.SD,
			s.UnallocatedGPUsAt100, s.PodsSubmitted, s.Seconds); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// writeTopologyMarkdown prints the summaries of runs with a topology as a Markdown table: the
// allocation and how well connected the multi-card containers' cards are.
func writeTopologyMarkdown(w io.Writer, sums []*Summary) error {
	if _, err := fmt.Fprintf(w, "#### %s, topology %s (%d seeds)\n\n"+
		"| policy | alloc@100 %% (mean ± sd) | alloc@130 %% | multi-card containers | on best set %% | on best free set %% |\n"+
		"|---|---|---|---|---|---|\n", sums[0].Trace, sums[0].Topology, len(sums[0].Seeds)); err != nil {
		return err
	}
	for _, s := range sums {
		best, free := s.multiCardShares()
		if _, err := fmt.Fprintf(w, "| %s | %.2f ± %.2f | %.2f ± %.2f | %.1f | %.2f ± %.2f | %.2f ± %.2f |\n", s.Policy,
			s.AllocAt100.Mean, s.AllocAt100.SD, s.AllocAt130.Mean, s.AllocAt130.SD, s.MultiCard,
			best.Mean, best.SD, free.Mean, free.SD); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// writePreemptionMarkdown prints the summaries of runs with priorities (--preemption) as a
// Markdown table: each policy without and with preemption, the allocation of all pods and of
// those above BE, and what preemption evicted.
func writePreemptionMarkdown(w io.Writer, sums []*Summary) error {
	if _, err := fmt.Fprintf(w, "#### %s, qos priorities (%d seeds)\n\n"+
		"| policy | preemption | alloc@100 %% (mean ± sd) | alloc@130 %% | above-BE alloc@100 %% | preemptions | pods preempted | GPUs evicted | s/run |\n"+
		"|---|---|---|---|---|---|---|---|---|\n", sums[0].Trace, len(sums[0].Seeds)); err != nil {
		return err
	}
	for _, s := range sums {
		p := s.Preemption
		if p == nil {
			p = &PreemptionSummary{HighAllocAt100: Stat{Mean: math.NaN(), SD: math.NaN()}}
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %.2f ± %.2f | %.2f ± %.2f | %.2f ± %.2f | %.1f | %.1f | %.1f | %.2f |\n", s.Policy, onOff(p.On),
			s.AllocAt100.Mean, s.AllocAt100.SD, s.AllocAt130.Mean, s.AllocAt130.SD, p.HighAllocAt100.Mean, p.HighAllocAt100.SD,
			p.Preemptions, p.PodsPreempted, p.GPUsEvicted, s.Seconds); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}
