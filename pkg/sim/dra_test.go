package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	placementtesting "github.com/gpushare/gpushare/pkg/placement/testing"
)

func TestParseDRA(t *testing.T) {
	tests := []struct {
		in      string
		want    *DRA
		wantErr bool
	}{
		{in: "off"},
		{in: "index", want: &DRA{Node: DRANodePredict, Order: CardOrderIndex}},
		{in: "tightest", want: &DRA{Node: DRANodePredict, Order: CardOrderTightest}},
		{in: "naive-emptiest", want: &DRA{Node: DRANodeNaive, Order: CardOrderEmptiest}},
		{in: "kube-index", want: &DRA{Node: DRANodeKube, Order: CardOrderIndex}},
		{in: "kube-", wantErr: true},
		{in: "fullest", wantErr: true},
		{in: "naive-off", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDRA(tt.in)
			if tt.wantErr {
				if err == nil || !errors.Is(err, ErrBadConfig) {
					t.Fatalf("ParseDRA(%q) = %v, %v; want an ErrBadConfig", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseDRA(%q) (-want,+got):\n%s", tt.in, diff)
			}
			if s := got.String(); s != tt.in {
				t.Errorf("String() = %q, want %q back", s, tt.in)
			}
		})
	}
}

// testPlacer is a placer over a fresh cache of nodes, with the identity tie order.
func testPlacer(t *testing.T, nodes []Node, policy placement.Policy, v *DRA) (*placer, cache.Cache) {
	t.Helper()
	names := contract.DefaultNames()
	c := cache.New(names, klog.Background().V(10))
	if err := newCluster(nodes, &names, c, false); err != nil {
		t.Fatal(err)
	}
	perm := make([]int, len(nodes))
	for i := range perm {
		perm[i] = i
	}
	p := newPlacer(nodes, c, policy, perm)
	p.dra = newDRAPlacer(v)
	return p, c
}

// place decides pod through p and charges its choice to the cache; it returns the choice made.
func place(t *testing.T, p *placer, c cache.Cache, pod *Pod, seq int) (placement.Choice, *gpumem.PodRequest, bool) {
	t.Helper()
	names := contract.DefaultNames()
	obj := PodObject(pod, seq, &names)
	req, res, err := podRequest(obj, &names)
	if err != nil {
		t.Fatal(err)
	}
	d, best, ok, err := p.decide(obj, &req, res, names.UnitLabel())
	if err != nil || !ok {
		return best, &req, false
	}
	charge := func(node string, alloc contract.Allocation) (contract.Allocation, error) {
		return c.AssumePod(obj, &req, node, alloc)
	}
	if _, err := d.Assume(best, c.Node, charge, names.UnitLabel()); err != nil {
		t.Fatalf("pod %s: %v", obj.Name, err)
	}
	return best, &req, true
}

// TestDRACardsAreTheAllocators: under every DRA variant, whoever chooses the node, each pod
// gets the cards FirstFit gives it on that node's snapshot before it.
func TestDRACardsAreTheAllocators(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pods := make([]Pod, 120)
	for i := range pods {
		pods[i] = Pod{Name: fmt.Sprintf("p%03d", i), MilliCPU: 100, MemoryMiB: 64, NumGPU: 1, GPUMilli: []int64{150, 300, 470, 650, 1000}[rng.IntN(5)]}
		if i%9 == 0 {
			pods[i].NumGPU, pods[i].GPUMilli = 2, 1000
		}
	}
	for _, node := range []DRANode{DRANodePredict, DRANodeNaive, DRANodeKube} {
		for _, order := range cardOrders() {
			v := &DRA{Node: node, Order: order}
			t.Run(v.String(), func(t *testing.T) {
				policy, err := policies.NewRegistry().New(policies.Default)
				if err != nil {
					t.Fatal(err)
				}
				p, c := testPlacer(t, synthNodes(6, 4), policy, v)
				placed := 0
				for i := range pods {
					best, req, ok := place(t, p, c, &pods[i], i)
					if !ok {
						continue
					}
					placed++
					cr := req.Containers[0]
					want, _ := placement.FirstFit(best.Node, order, cr.PerGPU(), cr.GPUs, req)
					if got := best.Plan.UsedGPUs(); !cmp.Equal(want, got) {
						t.Fatalf("pod %d on %s (free %v): cards %v, the allocator's %v", i, best.Node.Name, best.Node.UsableFree(), got, want)
					}
				}
				if placed == 0 {
					t.Fatal("no pod placed")
				}
			})
		}
	}
}

// occupy charges units on card of node to a pod named name, as a bound pod would hold them.
func occupy(t *testing.T, c cache.Cache, name, node string, card int, units int64) {
	t.Helper()
	names := contract.DefaultNames()
	obj := PodObject(&Pod{Name: name, MilliCPU: 100, MemoryMiB: 64, NumGPU: 1, GPUMilli: units}, 0, &names)
	req, _, err := podRequest(obj, &names)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AssumePod(obj, &req, node, gpumem.Allocation{req.Containers[0].Key: {card: units}}); err != nil {
		t.Fatal(err)
	}
}

// TestDRAPredictRatesTheAllocatorsCard: with the node chosen by a policy (binpack here, whose
// rating is easy to follow) and the card by first-fit in index order, "predict" takes the node
// the policy rates best with the card the allocator will take there, and "naive" the node it
// rates best with its own card. On node a (free 1000, 500) binpack would fill card 1 exactly,
// but the allocator takes card 0; on node b (free 600, 1000) both take card 0.
func TestDRAPredictRatesTheAllocatorsCard(t *testing.T) {
	pod := Pod{Name: "new", MilliCPU: 100, MemoryMiB: 64, NumGPU: 1, GPUMilli: 500}
	rated := map[DRANode]map[string]float64{}
	chose := map[DRANode]string{}
	for _, node := range []DRANode{DRANodePredict, DRANodeNaive} {
		p, c := testPlacer(t, synthNodes(2, 2), placement.Binpack{}, &DRA{Node: node, Order: CardOrderIndex})
		occupy(t, c, "a1", "node-00", 1, 500)
		occupy(t, c, "b0", "node-01", 0, 400)
		snapshots := c.Lookup(p.names)
		req := placementtesting.Claim(500, 1)
		rated[node] = map[string]float64{}
		for _, n := range snapshots { // the rule: binpack's rating of the plan each chooser has in mind
			plan := &placement.Plan{}
			if node == DRANodeNaive {
				plan, _ = placement.PlanPod(n, req, placement.Binpack{})
			} else {
				cards, _ := placement.FirstFit(n, CardOrderIndex, 500, 1, req)
				plan.Slots = []placement.Slot{{GPU: cards[0], Units: 500}}
			}
			rated[node][n.Name] = placement.Binpack{}.ScoreNode(n, plan, req)
		}
		best, _, ok := place(t, p, c, &pod, 1)
		if !ok {
			t.Fatalf("%s: not placed", node)
		}
		chose[node] = best.Node.Name
	}
	for node, scores := range rated {
		want := "node-00"
		if scores["node-01"] > scores["node-00"] {
			want = "node-01"
		}
		if scores["node-01"] == scores["node-00"] || chose[node] != want {
			t.Errorf("%s: chose %s; binpack rates %v, want the best", node, chose[node], scores)
		}
	}
	if chose[DRANodePredict] == chose[DRANodeNaive] {
		t.Errorf("predict and naive both chose %s: the case does not tell them apart", chose[DRANodePredict])
	}
}

// TestCompareWithFull: a DRA variant is compared with the runs without DRA of its policy,
// kube-scheduler's with the first policy's, seed by seed.
func TestCompareWithFull(t *testing.T) {
	curve := func(at100, at130 float64) *Result {
		c := make([]float64, 131)
		c[100], c[130] = at100, at130
		return &Result{Curve: c, CapacityMilli: 1000}
	}
	full := []*Result{curve(96, 97), curve(95, 96), curve(97, 97.5)}
	index := []*Result{curve(95.5, 96.8), curve(95, 95), curve(96, 97)}
	kube := []*Result{curve(92, 93), curve(91, 94), curve(93, 93)}
	fullB := []*Result{curve(90, 91), curve(90, 91), curve(90, 91)}
	indexB := []*Result{curve(89, 91), curve(89, 91), curve(89, 91)}
	runs := [][]*Result{full, index, kube, fullB, indexB}
	var sums []*Summary
	for i, v := range []*DRA{nil, {Node: DRANodePredict, Order: CardOrderIndex}, {Node: DRANodeKube, Order: CardOrderIndex}, nil, {Node: DRANodePredict, Order: CardOrderIndex}} {
		s := Summarise(map[bool]string{true: "a", false: "b"}[i < 3], "t", []int{1, 2, 3}, runs[i])
		s.markDRA(v)
		sums = append(sums, s)
	}
	compareWithFull(sums, runs)
	paired := func(a, b []*Result, at int) Stat {
		var d []float64
		for k := range a {
			d = append(d, a[k].Curve[at]-b[k].Curve[at])
		}
		mean := (d[0] + d[1] + d[2]) / 3
		sd := math.Sqrt(((d[0]-mean)*(d[0]-mean) + (d[1]-mean)*(d[1]-mean) + (d[2]-mean)*(d[2]-mean)) / 2)
		return Stat{Mean: round2(mean), SD: round2(sd)}
	}
	want := []*DRAComparison{nil,
		{Against: "a", AllocAt100: paired(index, full, 100), AllocAt130: paired(index, full, 130)},
		{Against: "a", AllocAt100: paired(kube, full, 100), AllocAt130: paired(kube, full, 130)},
		nil,
		{Against: "b", AllocAt100: paired(indexB, fullB, 100), AllocAt130: paired(indexB, fullB, 130)}}
	for i, s := range sums {
		if diff := cmp.Diff(want[i], s.VsFull); diff != "" {
			t.Errorf("%s %s: VsFull (-want,+got):\n%s", s.Policy, s.DRA, diff)
		}
	}
	if sums[2].Policy != KubeSchedulerName {
		t.Errorf("kube-scheduler's runs are labelled %q", sums[2].Policy)
	}
}

// TestWriteDRAMarkdown: a DRA run's table has a row per variant saying who chose the node and
// the card, and its paired difference to the runs without DRA ("—" for those runs).
func TestWriteDRAMarkdown(t *testing.T) {
	r := func(at100 float64) *Result {
		c := make([]float64, 131)
		c[100], c[130] = at100, at100+1
		return &Result{Curve: c, CapacityMilli: 1000, Seconds: 2}
	}
	runs := [][]*Result{{r(96), r(95)}, {r(95.5), r(95)}, {r(92), r(93)}}
	var sums []*Summary
	for i, v := range []*DRA{nil, {Node: DRANodeNaive, Order: CardOrderTightest}, {Node: DRANodeKube, Order: CardOrderIndex}} {
		s := Summarise("fgd-online", "default", []int{42, 43}, runs[i])
		s.markDRA(v)
		sums = append(sums, s)
	}
	compareWithFull(sums, runs)
	var b strings.Builder
	if err := WriteMarkdown(&b, sums); err != nil {
		t.Fatal(err)
	}
	two := func(format string, a, b float64) string { // mean and sd of two values, as printed
		return fmt.Sprintf(format, (a+b)/2, math.Abs(a-b)/math.Sqrt2)
	}
	at := func(k int) string { return two("%.2f ± %.2f", runs[k][0].Curve[100], runs[k][1].Curve[100]) }
	diff := func(k int) string {
		return two("%+.2f ± %.2f", runs[k][0].Curve[100]-runs[0][0].Curve[100], runs[k][1].Curve[100]-runs[0][1].Curve[100])
	}
	for _, want := range []string{
		"#### default under DRA (2 seeds)",
		"| off | `fgd-online` | `fgd-online` (full: the extender binds) | " + at(0) + " | — |",
		"| naive-tightest | `fgd-online`, rating its own card | allocator: first-fit, `tightest` order | " + at(1) + " | " + diff(1) + " |",
		"| kube-index | kube-scheduler alone (LeastAllocated + BalancedAllocation) | allocator: first-fit, `index` order | " + at(2) + " | " + diff(2) + " |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
