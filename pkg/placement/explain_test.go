package placement_test

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// TestExplain: each kind of misfit, worded for the node (Reason) and for the pod alone
// (Summary), and whether removing pods could help (Unresolvable false).
func TestExplain(t *testing.T) {
	busy := func() *placement.NodeInfo { return snap("n", gpu(16, 10), gpu(16, 4)) } // free 6 and 12
	renumbered := busy()
	renumbered.GPUs[1].Index = 7 // the reason names the card by its NVML index, not its position
	tests := []struct {
		name string
		node *placement.NodeInfo
		req  *gpumem.PodRequest
		unit string
		want placement.FitError
	}{
		{name: "no GPUs", node: snap("n"), req: one(1), unit: "GiB", want: placement.FitError{
			Reason:       "GPU memory: node has no shared GPUs",
			Summary:      "GPU memory: node has no shared GPUs",
			Unresolvable: true}},
		{name: "every card unhealthy", node: snap("n", sick(gpu(16, 0)), sick(gpu(16, 0))), req: one(1), unit: "GiB", want: placement.FitError{
			Reason:       "GPU memory: all 2 GPUs of the node are unhealthy",
			Summary:      "GPU memory: all GPUs of the node are unhealthy",
			Unresolvable: true}},
		// The A100 is unhealthy: only the healthy models are listed, each once, sorted.
		{name: "no healthy card of an accepted model",
			node: snap("n", gpu(16, 0), ofModel("NVIDIA A10", gpu(24, 0)), gpu(16, 0), sick(ofModel("NVIDIA A100-PCIE-40GB", gpu(40, 0)))),
			req:  withModels(one(1), "H100", "A100"), unit: "GiB", want: placement.FitError{
				Reason:       `GPU model: pod accepts H100|A100, node has "NVIDIA A10", "Tesla T4"`,
				Summary:      "GPU model: no healthy GPU of model H100|A100",
				Unresolvable: true}},
		{name: "fewer usable cards than the container spreads over", node: snap("n", gpu(16, 0), sick(gpu(16, 0)), gpu(16, 0)),
			req: ask(ctr("0", 3, 3)), unit: "GiB", want: placement.FitError{
				Reason:       "GPU memory: pod needs 3 GPUs, node has 2 usable",
				Summary:      "GPU memory: pod needs 3 GPUs, fewer are usable",
				Unresolvable: true}},
		{name: "no card is that large", node: snap("n", gpu(8, 0), gpu(16, 0)), req: one(20), unit: "GiB", want: placement.FitError{
			Reason:       "GPU memory: largest GPU has 16 GiB, pod needs 20 GiB on one GPU",
			Summary:      "GPU memory: no GPU has 20 GiB",
			Unresolvable: true}},
		// The 40 GiB card is of a model the pod does not accept.
		{name: "no card of the accepted model is that large",
			node: snap("n", gpu(16, 0), ofModel("NVIDIA A100-PCIE-40GB", gpu(40, 0))), req: withModels(one(20), "T4"), unit: "GiB",
			want: placement.FitError{
				Reason:       "GPU memory: largest GPU has 16 GiB, pod needs 20 GiB on one GPU",
				Summary:      "GPU memory: no GPU has 20 GiB",
				Unresolvable: true}},
		{name: "the largest per-card ask of the containers", node: busy(), req: ask(ctr("a", 4, 1), ctr("b", 34, 2)), unit: "GiB",
			want: placement.FitError{
				Reason:       "GPU memory: largest GPU has 16 GiB, pod needs 17 GiB on one GPU",
				Summary:      "GPU memory: no GPU has 17 GiB",
				Unresolvable: true}},
		{name: "no card has that much free", node: renumbered, req: one(13), unit: "MiB", want: placement.FitError{
			Reason:  "GPU memory: largest free block 12 MiB on GPU7, pod needs 13 MiB",
			Summary: "GPU memory: no GPU has 13 MiB free"}},
		{name: "too few cards have the per-card ask free", node: busy(), req: ask(ctr("0", 16, 2)), unit: "GiB", want: placement.FitError{
			Reason:  "GPU memory: fewer than 2 GPUs have 8 GiB free",
			Summary: "GPU memory: fewer than 2 GPUs have 8 GiB free"}},
		{name: "containers that fit alone, not together", node: busy(), req: ask(ctr("a", 10, 1), ctr("b", 10, 1)), unit: "GiB",
			want: placement.FitError{
				Reason:  "GPU memory: the pod's 2 containers (20 GiB in all) do not fit together on the free GPU memory",
				Summary: "GPU memory: the pod's 2 containers (20 GiB in all) do not fit together on the free GPU memory"}},
		// The init container's 13 counts as the pod's total, not 13+1.
		{name: "an init container that fits nowhere first", node: busy(), req: ask(initCtr("init-0", 13), ctr("0", 1, 1)), unit: "GiB",
			want: placement.FitError{
				Reason:  "GPU memory: largest free block 12 GiB on GPU1, pod needs 13 GiB",
				Summary: "GPU memory: no GPU has 13 GiB free"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if placement.NewDecision(placement.Binpack{}, tt.req, placement.PodResources{}).Feasible(tt.node, &placement.Plan{}) {
				t.Fatal("the pod fits: nothing to explain")
			}
			got := placement.Explain(tt.node, tt.req, tt.unit)
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("Explain() (-want,+got):\n%s", diff)
			}
			if got.Error() != tt.want.Reason {
				t.Errorf("Error() = %q, want the reason %q", got.Error(), tt.want.Reason)
			}
			sum := placement.NewSummaries(tt.req, tt.unit).Explain(tt.node)
			want := placement.FitError{Summary: tt.want.Summary, Unresolvable: tt.want.Unresolvable}
			if diff := cmp.Diff(&want, sum); diff != "" {
				t.Errorf("Summaries.Explain() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSummariesShare: the nodes that fail one way share one FitError, those that fail another
// way another, also when passes in parallel explain them.
func TestSummariesShare(t *testing.T) {
	small := []*placement.NodeInfo{snap("s0", gpu(8, 0)), snap("s1", gpu(4, 0), gpu(8, 0))}    // no card has 10
	busy := []*placement.NodeInfo{snap("b0", gpu(16, 8)), snap("b1", gpu(16, 7), gpu(16, 16))} // none has 10 free
	sums := placement.NewSummaries(one(10), "GiB")
	got := make([]*placement.FitError, 4)
	var wg sync.WaitGroup
	for i, n := range append(append([]*placement.NodeInfo(nil), small...), busy...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = sums.Explain(n)
		}()
	}
	wg.Wait()
	if got[0] != got[1] || got[2] != got[3] {
		t.Errorf("nodes failing the same way got distinct errors: %p %p, %p %p", got[0], got[1], got[2], got[3])
	}
	if got[0] == got[2] {
		t.Fatal("nodes failing in different ways share one error")
	}
	want := []placement.FitError{
		{Summary: "GPU memory: no GPU has 10 GiB", Unresolvable: true},
		{Summary: "GPU memory: no GPU has 10 GiB free"},
	}
	if diff := cmp.Diff(want, []placement.FitError{*got[0], *got[2]}); diff != "" {
		t.Errorf("Summaries.Explain() (-want,+got):\n%s", diff)
	}
}
