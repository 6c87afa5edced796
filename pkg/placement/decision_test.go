package placement_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// The builders below make small hand-built snapshots and requests for the tests of Decision,
// Explain and the policies: the numbers of a test are then all in its table.

// gpu is a healthy Tesla T4 card of capacity units with used of them held.
func gpu(capacity, used int64) placement.GPUInfo {
	return placement.GPUInfo{Model: "Tesla T4", Capacity: capacity, Used: used, Healthy: true}
}

// sick is g reported unhealthy.
func sick(g placement.GPUInfo) placement.GPUInfo { g.Healthy = false; return g }

// ofModel is g of another model.
func ofModel(model string, g placement.GPUInfo) placement.GPUInfo { g.Model = model; return g }

// snap is the summarised snapshot of node name with gpus, NVML indexes 0, 1, ... in order.
func snap(name string, gpus ...placement.GPUInfo) *placement.NodeInfo {
	n := &placement.NodeInfo{Name: name}
	for i := range gpus {
		gpus[i].Index = i
	}
	n.SetGPUs(gpus)
	n.Summarize()
	return n
}

// ctr is app container key asking units over gpus cards.
func ctr(key string, units int64, gpus int) gpumem.ContainerRequest {
	return gpumem.ContainerRequest{Key: key, Units: units, GPUs: gpus}
}

// initCtr is init container key asking units on one card.
func initCtr(key string, units int64) gpumem.ContainerRequest {
	return gpumem.ContainerRequest{Key: key, Units: units, GPUs: 1, Init: true}
}

// ask is a pod of containers; one is "0" of units on one card, the most common pod.
func ask(containers ...gpumem.ContainerRequest) *gpumem.PodRequest {
	return &gpumem.PodRequest{Containers: containers}
}

// one is a pod of one container of units on one card.
func one(units int64) *gpumem.PodRequest { return ask(ctr("0", units, 1)) }

// withModels is req accepting only models.
func withModels(req *gpumem.PodRequest, models ...string) *gpumem.PodRequest {
	req.SetModels(models)
	return req
}

// ranked lists the nodes req fits under policy, best score first (ties in the nodes' order),
// each as "name[cards]" with the cards of its plan, and the scores in the same order.
func ranked(policy placement.Policy, req *gpumem.PodRequest, nodes ...*placement.NodeInfo) ([]string, []float64) {
	d := placement.NewDecision(policy, req, placement.PodResources{})
	var names []string
	var scores []float64
	for _, n := range nodes {
		plan := &placement.Plan{}
		s, ok := d.Score(n, plan)
		if !ok {
			continue
		}
		at := len(scores)
		for at > 0 && scores[at-1] < s {
			at--
		}
		names = append(names[:at], append([]string{fmt.Sprintf("%s%v", n.Name, plan.UsedGPUs())}, names[at:]...)...)
		scores = append(scores[:at], append([]float64{s}, scores[at:]...)...)
	}
	return names, scores
}

// approx compares scores computed by hand with those computed in another order.
var approx = cmpopts.EquateApprox(0, 1e-12)

func TestDecisionFeasible(t *testing.T) {
	// Free 6 and 12 of 16: MaxFree 12.
	busy := func() *placement.NodeInfo { return snap("n", gpu(16, 10), gpu(16, 4)) }
	tests := []struct {
		name string
		node *placement.NodeInfo
		req  *gpumem.PodRequest
		want bool
	}{
		{"one card, exactly the largest free block", busy(), one(12), true},
		{"one card, a unit more than the largest free block", busy(), one(13), false},
		{"an unhealthy card's free units do not count", snap("n", sick(gpu(16, 0)), gpu(16, 8)), one(10), false},
		{"the healthy card fits", snap("n", sick(gpu(16, 0)), gpu(16, 8)), one(8), true},
		// The model's card has 10 free, the other model's 16: the largest free block alone
		// would say yes.
		{"a model constraint plans: too little on the accepted card", snap("n", gpu(16, 0), ofModel("NVIDIA A100-PCIE-40GB", gpu(40, 30))),
			withModels(one(12), "A100"), false},
		{"a model constraint plans: the accepted card fits", snap("n", gpu(16, 0), ofModel("NVIDIA A100-PCIE-40GB", gpu(40, 30))),
			withModels(one(10), "A100"), true},
		{"two containers that fit side by side", busy(), ask(ctr("a", 12, 1), ctr("b", 6, 1)), true},
		{"two containers that each fit alone only", busy(), ask(ctr("a", 10, 1), ctr("b", 10, 1)), false},
		{"one container over two cards, 6 on each", busy(), ask(ctr("0", 12, 2)), true},
		{"one container over two cards, 7 on each", busy(), ask(ctr("0", 14, 2)), false},
		{"an init container needs its card before the apps", busy(), ask(initCtr("init-0", 13), ctr("0", 1, 1)), false},
		{"a pod without GPU memory fits a node without GPUs", snap("n"), ask(), true},
		{"a GPU pod does not", snap("n"), one(1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := placement.NewDecision(placement.Binpack{}, tt.req, placement.PodResources{})
			if got := d.Feasible(tt.node, &placement.Plan{}); got != tt.want {
				t.Errorf("Feasible() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDecisionPlan: the card(s) Score plans for each container, under binpack (tightest card)
// and spread (emptiest card), on free units 6 and 12 (and 16 where a third card is there).
func TestDecisionPlan(t *testing.T) {
	two := func() *placement.NodeInfo { return snap("n", gpu(16, 10), gpu(16, 4)) }
	three := func() *placement.NodeInfo { return snap("n", gpu(16, 10), gpu(16, 4), gpu(16, 0)) }
	tests := []struct {
		name    string
		node    *placement.NodeInfo
		req     *gpumem.PodRequest
		binpack []placement.Slot
		spread  []placement.Slot
	}{
		{name: "one card", node: two(), req: one(4),
			binpack: []placement.Slot{{Container: 0, GPU: 0, Units: 4}},
			spread:  []placement.Slot{{Container: 0, GPU: 1, Units: 4}}},
		{name: "only one card is large enough", node: two(), req: one(7),
			binpack: []placement.Slot{{Container: 0, GPU: 1, Units: 7}},
			spread:  []placement.Slot{{Container: 0, GPU: 1, Units: 7}}},
		{name: "the larger container first, the other where it still fits", node: two(), req: ask(ctr("a", 5, 1), ctr("b", 10, 1)),
			binpack: []placement.Slot{{Container: 1, GPU: 1, Units: 10}, {Container: 0, GPU: 0, Units: 5}},
			spread:  []placement.Slot{{Container: 1, GPU: 1, Units: 10}, {Container: 0, GPU: 0, Units: 5}}},
		{name: "the second container sees the first's units taken", node: two(), req: ask(ctr("a", 3, 1), ctr("b", 3, 1)),
			binpack: []placement.Slot{{Container: 0, GPU: 0, Units: 3}, {Container: 1, GPU: 0, Units: 3}},
			spread:  []placement.Slot{{Container: 0, GPU: 1, Units: 3}, {Container: 1, GPU: 1, Units: 3}}},
		{name: "one container over two cards", node: three(), req: ask(ctr("0", 8, 2)),
			binpack: []placement.Slot{{Container: 0, GPU: 0, Units: 4}, {Container: 0, GPU: 1, Units: 4}},
			spread:  []placement.Slot{{Container: 0, GPU: 2, Units: 4}, {Container: 0, GPU: 1, Units: 4}}},
		{name: "an init container reuses its app's card", node: two(), req: ask(initCtr("init-0", 4), ctr("0", 5, 1)),
			binpack: []placement.Slot{{Container: 1, GPU: 0, Units: 5}, {Container: 0, GPU: 0, Units: 4}},
			spread:  []placement.Slot{{Container: 1, GPU: 1, Units: 5}, {Container: 0, GPU: 1, Units: 4}}},
		{name: "a pod without GPU memory has an empty plan", node: two(), req: ask()},
	}
	for _, tt := range tests {
		for _, p := range []placement.Policy{placement.Binpack{}, placement.Spread{}} {
			t.Run(tt.name+"/"+p.Name(), func(t *testing.T) {
				want := tt.binpack
				if p.Name() == "spread" {
					want = tt.spread
				}
				plan := &placement.Plan{Slots: []placement.Slot{{GPU: 9}}} // scratch: overwritten
				if _, ok := placement.NewDecision(p, tt.req, placement.PodResources{}).Score(tt.node, plan); !ok {
					t.Fatalf("Score() found no fit: %v", placement.Explain(tt.node, tt.req, "GiB"))
				}
				if diff := cmp.Diff(want, plan.Slots, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("plan (-want,+got):\n%s", diff)
				}
				if err := tt.node.CheckFit(tt.req, plan.Allocation(tt.node, tt.req)); err != nil {
					t.Errorf("the plan does not fit the node: %v", err)
				}
			})
		}
	}
}

func TestDecisionChoose(t *testing.T) {
	nodes := []*placement.NodeInfo{
		nil, // skipped
		snap("empty", gpu(16, 0)),
		snap("half", gpu(16, 8)),
		snap("full", gpu(16, 14)), // 2 free: a 4-unit pod does not fit
		snap("half-too", gpu(16, 8)),
	}
	lower := func(i, j int) bool { return i < j }
	higher := func(i, j int) bool { return i > j }
	not := func(name string) func(*placement.NodeInfo) bool {
		return func(n *placement.NodeInfo) bool { return n.Name != name }
	}
	tests := []struct {
		name      string
		policy    placement.Policy
		req       *gpumem.PodRequest
		admit     func(*placement.NodeInfo) bool
		before    func(i, j int) bool
		wantIndex int // -1: none
		wantNode  string
		wantScore float64
	}{
		// half: card (8+4)/16, node the same /100.
		{name: "binpack: the fullest node, ties to the lower index", policy: placement.Binpack{}, req: one(4), before: lower,
			wantIndex: 2, wantNode: "half", wantScore: 0.75 + 0.0075},
		{name: "binpack: ties to the higher index", policy: placement.Binpack{}, req: one(4), before: higher,
			wantIndex: 4, wantNode: "half-too", wantScore: 0.75 + 0.0075},
		{name: "binpack: a node admit refuses is skipped", policy: placement.Binpack{}, req: one(4), before: lower, admit: not("half"),
			wantIndex: 4, wantNode: "half-too", wantScore: 0.75 + 0.0075},
		// empty: card 4/16, node the same /100, negated.
		{name: "spread: the emptiest node", policy: placement.Spread{}, req: one(4), before: lower,
			wantIndex: 1, wantNode: "empty", wantScore: -(0.25 + 0.0025)},
		// full: card (14+2)/16, node the same /100.
		{name: "binpack: a pod that fills a card wins", policy: placement.Binpack{}, req: one(2), before: lower,
			wantIndex: 3, wantNode: "full", wantScore: 1 + 0.01},
		{name: "no node fits", policy: placement.Binpack{}, req: one(17), before: lower, wantIndex: -1},
		{name: "admit refuses every node", policy: placement.Spread{}, req: one(1), before: lower,
			admit: func(*placement.NodeInfo) bool { return false }, wantIndex: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := placement.NewDecision(tt.policy, tt.req, placement.PodResources{}).Choose(nodes, tt.admit, tt.before)
			if ok != (tt.wantIndex >= 0) || c.Index != tt.wantIndex {
				t.Fatalf("Choose() = index %d, %v; want index %d", c.Index, ok, tt.wantIndex)
			}
			if !ok {
				return
			}
			if c.Node != nodes[c.Index] || c.Node.Name != tt.wantNode {
				t.Errorf("Choose() node %q at index %d, want %q", c.Node.Name, c.Index, tt.wantNode)
			}
			if diff := cmp.Diff(tt.wantScore, c.Score, approx); diff != "" {
				t.Errorf("Choose() score (-want,+got):\n%s", diff)
			}
			want := gpumem.Allocation{"0": {0: tt.req.Containers[0].Units}}
			if diff := cmp.Diff(want, c.Plan.Allocation(c.Node, tt.req)); diff != "" {
				t.Errorf("Choose() plan (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDecisionPlace(t *testing.T) {
	node := snap("n", gpu(16, 10), gpu(16, 4))
	tests := []struct {
		name    string
		req     *gpumem.PodRequest
		want    gpumem.Allocation
		wantErr string
	}{
		{name: "fits", req: one(4), want: gpumem.Allocation{"0": {0: 4}}},
		{name: "fits on the larger card", req: one(8), want: gpumem.Allocation{"0": {1: 8}}},
		{name: "does not fit: Explain's reason", req: one(13), wantErr: "GPU memory: largest free block 12 MiB on GPU1, pod needs 13 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := placement.NewDecision(placement.Binpack{}, tt.req, placement.PodResources{}).Place(node, "MiB")
			if tt.wantErr != "" {
				var fe *placement.FitError
				if !errors.As(err, &fe) || err.Error() != tt.wantErr {
					t.Fatalf("Place() error = %v, want the FitError %q", err, tt.wantErr)
				}
				if diff := cmp.Diff(placement.Explain(node, tt.req, "MiB"), fe); diff != "" {
					t.Errorf("Place() error is not Explain's (-want,+got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Index != -1 || c.Node != node || c.Score != 0 {
				t.Errorf("Place() = index %d, node %p, score %v; want -1, %p, 0", c.Index, c.Node, c.Score, node)
			}
			if diff := cmp.Diff(tt.want, c.Plan.Allocation(node, tt.req)); diff != "" {
				t.Errorf("Place() plan (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDecisionAssume: Assume charges the chosen plan; when a concurrent placement took the card
// (ErrDoesNotFit) it plans again on the fresh snapshot, at most three times in all.
func TestDecisionAssume(t *testing.T) {
	stale := snap("n", gpu(16, 10), gpu(16, 4)) // a 4-unit pod goes to card 0 (binpack)
	taken := snap("n", gpu(16, 14), gpu(16, 4)) // someone took card 0 meanwhile: card 1
	full := snap("n", gpu(16, 14), gpu(16, 14))
	conflict := fmt.Errorf("%w: GPU 0 of node n has 2 units free", placement.ErrDoesNotFit)
	boom := errors.New("boom")
	// answer is one answer of the assumer; it gives them in turn, the last one again once
	// they run out.
	type answer struct {
		alloc gpumem.Allocation // nil: what was asked
		err   error
	}
	tests := []struct {
		name      string
		fresh     *placement.NodeInfo // nil: lookup finds no node
		answers   []answer
		wantCalls []gpumem.Allocation
		want      gpumem.Allocation
		wantErr   error  // errors.Is
		wantMsg   string // the error's text, when not a sentinel's
	}{
		{name: "charges the chosen card", fresh: taken, answers: []answer{{}},
			wantCalls: []gpumem.Allocation{{"0": {0: 4}}}, want: gpumem.Allocation{"0": {0: 4}}},
		{name: "the pod already placed keeps its placement", fresh: taken, answers: []answer{{alloc: gpumem.Allocation{"0": {1: 4}}}},
			wantCalls: []gpumem.Allocation{{"0": {0: 4}}}, want: gpumem.Allocation{"0": {1: 4}}},
		{name: "card taken: plans again on the fresh snapshot", fresh: taken, answers: []answer{{err: conflict}, {}},
			wantCalls: []gpumem.Allocation{{"0": {0: 4}}, {"0": {1: 4}}}, want: gpumem.Allocation{"0": {1: 4}}},
		{name: "gives up after three tries", fresh: taken, answers: []answer{{err: conflict}},
			wantCalls: []gpumem.Allocation{{"0": {0: 4}}, {"0": {1: 4}}, {"0": {1: 4}}}, wantErr: placement.ErrDoesNotFit},
		{name: "another error is not retried", fresh: taken, answers: []answer{{err: boom}},
			wantCalls: []gpumem.Allocation{{"0": {0: 4}}}, wantErr: boom},
		{name: "the node is gone", answers: []answer{{err: conflict}},
			wantCalls: []gpumem.Allocation{{"0": {0: 4}}}, wantErr: placement.ErrUnknownNode},
		{name: "the pod no longer fits: why", fresh: full, answers: []answer{{err: conflict}},
			wantCalls: []gpumem.Allocation{{"0": {0: 4}}}, wantMsg: "GPU memory: largest free block 2 GiB on GPU0, pod needs 4 GiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := placement.NewDecision(placement.Binpack{}, one(4), placement.PodResources{})
			c, err := d.Place(stale, "GiB")
			if err != nil {
				t.Fatal(err)
			}
			var calls []gpumem.Allocation
			assume := func(node string, alloc gpumem.Allocation) (gpumem.Allocation, error) {
				if node != "n" {
					t.Errorf("assume(%q), want node n", node)
				}
				calls = append(calls, alloc)
				a := tt.answers[min(len(calls), len(tt.answers))-1]
				if a.err != nil {
					return nil, a.err
				}
				if a.alloc != nil {
					return a.alloc, nil
				}
				return alloc, nil
			}
			lookup := func(name string) (*placement.NodeInfo, bool) { return tt.fresh, tt.fresh != nil && name == "n" }
			got, err := d.Assume(c, lookup, assume, "GiB")
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("Assume() error = %v, want %v", err, tt.wantErr)
			case tt.wantMsg != "" && (err == nil || err.Error() != tt.wantMsg):
				t.Errorf("Assume() error = %v, want %q", err, tt.wantMsg)
			case tt.wantErr == nil && tt.wantMsg == "" && err != nil:
				t.Errorf("Assume() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Assume() (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
				t.Errorf("placements assumed (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDecisionAssumeChargesCache: with the cache's AssumePod, the card the pod lands on holds
// its units afterwards, also when a concurrent placement took the chosen card first.
func TestDecisionAssumeChargesCache(t *testing.T) {
	tests := []struct {
		name     string
		rival    bool // another pod takes 4 units of card 0 between Choose and Assume
		want     gpumem.Allocation
		wantUsed []int64
	}{
		{name: "the chosen card", want: gpumem.Allocation{"0": {0: 4}}, wantUsed: []int64{14, 4}},
		{name: "the card left after a rival took the chosen one", rival: true,
			want: gpumem.Allocation{"0": {1: 4}}, wantUsed: []int64{14, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			c := cache.New(contract.DefaultNames(), logger)
			c.SetNode(st.MakeNode("n").GPUs(16, 16).Obj())
			c.SetPod(st.MakePod().Name("x").GPUMem(10).Node("n").Placement(`{"0":{"0":10}}`).Obj())
			c.SetPod(st.MakePod().Name("y").GPUMem(4).Node("n").Placement(`{"0":{"1":4}}`).Obj())
			pod := st.MakePod().Name("p").GPUMem(4).Obj()
			req := one(4)
			node, _ := c.Node("n")
			d := placement.NewDecision(placement.Binpack{}, req, placement.PodResources{})
			choice, ok := d.Choose([]*placement.NodeInfo{node}, nil, func(i, j int) bool { return i < j })
			if !ok {
				t.Fatal("Choose() found no node")
			}
			if tt.rival {
				rival := st.MakePod().Name("r").GPUMem(4).Obj()
				if _, err := c.AssumePod(rival, one(4), "n", gpumem.Allocation{"0": {0: 4}}); err != nil {
					t.Fatal(err)
				}
			}
			assume := func(name string, alloc gpumem.Allocation) (gpumem.Allocation, error) {
				return c.AssumePod(pod, req, name, alloc)
			}
			got, err := d.Assume(choice, c.Node, assume, "GiB")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Assume() (-want,+got):\n%s", diff)
			}
			after, _ := c.Node("n")
			used := []int64{after.GPUs[0].Used, after.GPUs[1].Used}
			if diff := cmp.Diff(tt.wantUsed, used); diff != "" {
				t.Errorf("cards' used units after Assume (-want,+got):\n%s", diff)
			}
		})
	}
}
