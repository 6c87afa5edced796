package scheduler_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/placement"
)

func TestPrioritize(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("empty").GPUs(16).Obj(), st.MakeNode("half").GPUs(16).Obj(),
		st.MakeNode("full").GPUs(16).Obj(), st.MakeNode("quarter").GPUs(16).Obj()}
	bound := []*v1.Pod{
		st.MakePod().Name("h").GPUMem(8).Node("half").Placement(`{"0":{"0":8}}`).Obj(),
		st.MakePod().Name("f").GPUMem(14).Node("full").Placement(`{"0":{"0":14}}`).Obj(),
		st.MakePod().Name("q").GPUMem(4).Node("quarter").Placement(`{"0":{"0":4}}`).Obj(),
	}
	names := []string{"empty", "half", "full", "quarter", "ghost"}
	tests := []struct {
		name   string
		policy string
		pod    *v1.Pod
		want   extenderv1.HostPriorityList
	}{
		// After placing 4: empty 4/16, quarter 8/16, half 12/16 (scaled 0, 5, 10); full does not fit.
		{name: "binpack prefers the fullest card", policy: "binpack", pod: st.MakePod().GPUMem(4).Obj(),
			want: extenderv1.HostPriorityList{{Host: "empty", Score: 0}, {Host: "half", Score: 10}, {Host: "full", Score: 0},
				{Host: "quarter", Score: 5}, {Host: "ghost", Score: 0}}},
		{name: "spread prefers the emptiest card", policy: "spread", pod: st.MakePod().GPUMem(4).Obj(),
			want: extenderv1.HostPriorityList{{Host: "empty", Score: 10}, {Host: "half", Score: 0}, {Host: "full", Score: 0},
				{Host: "quarter", Score: 5}, {Host: "ghost", Score: 0}}},
		// Used 0, 8, 14, 4 of 16: a pod without gpu-mem is packed where the cards are fullest,
		// so that its CPU strands no free card.
		{name: "no gpu-mem goes to the fullest cards (binpack)", policy: "binpack", pod: st.MakePod().Container().Obj(),
			want: extenderv1.HostPriorityList{{Host: "empty", Score: 0}, {Host: "half", Score: 5}, {Host: "full", Score: 10},
				{Host: "quarter", Score: 3}, {Host: "ghost", Score: 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.policy, nodes, bound...)
			got, err := e.ext.Prioritize(e.ctx, &extenderv1.ExtenderArgs{Pod: tt.pod, NodeNames: &names})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Prioritize() (-want,+got):\n%s", diff)
			}
			for _, hp := range got {
				if hp.Score < 0 || hp.Score > extenderv1.MaxExtenderPriority {
					t.Errorf("score %d of %s outside 0..%d", hp.Score, hp.Host, extenderv1.MaxExtenderPriority)
				}
			}
		})
	}
}

// TestPrioritizeTiesBrokenByTieOrder: among nodes the policy rates equally, exactly one gets
// the top score, the first in the pod's TieOrder, whatever the order of the request; another
// pod's order differs.
func TestPrioritizeTiesBrokenByTieOrder(t *testing.T) {
	var nodes []*v1.Node
	var names []string
	for i := range 40 {
		n := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, st.MakeNode(n).GPUs(16).Obj())
		names = append(names, n)
	}
	e := newEnv(t, "binpack", nodes)
	backward := slices.Clone(names)
	slices.Reverse(backward)
	firsts := map[string]bool{}
	for i, order := range [][]string{names, backward, names, backward} {
		pod := st.MakePod().Name(fmt.Sprintf("p%d", i/2)).GPUMem(4).Obj()
		first := names[0]
		for _, n := range names {
			if placement.TieOrder(pod.Namespace, pod.Name, n) < placement.TieOrder(pod.Namespace, pod.Name, first) {
				first = n
			}
		}
		firsts[first] = true
		got, err := e.ext.Prioritize(e.ctx, &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &order})
		if err != nil {
			t.Fatal(err)
		}
		var top []string
		for _, hp := range got {
			switch hp.Score {
			case extenderv1.MaxExtenderPriority:
				top = append(top, hp.Host)
			case extenderv1.MaxExtenderPriority - 1:
			default:
				t.Errorf("node %s scored %d; equally good nodes score %d or %d", hp.Host, hp.Score, extenderv1.MaxExtenderPriority, extenderv1.MaxExtenderPriority-1)
			}
		}
		if diff := cmp.Diff([]string{first}, top); diff != "" {
			t.Errorf("pod %s: nodes with the top score (-want,+got):\n%s", pod.Name, diff)
		}
	}
	if len(firsts) < 2 {
		t.Errorf("two pods broke their ties alike (%v): a burst would pile onto one node", firsts)
	}
}

// TestPrioritizeBestNodeStandsAlone: nodes a hair worse than the best do not tie with it in the
// extender's coarse 0..10 range.
func TestPrioritizeBestNodeStandsAlone(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("x").GPUs(16, 16).Obj(), st.MakeNode("y").GPUs(16, 16).Obj(), st.MakeNode("z").GPUs(16, 16).Obj()}
	bound := []*v1.Pod{
		st.MakePod().Name("x0").GPUMem(8).Node("x").Placement(`{"0":{"0":8}}`).Obj(),
		st.MakePod().Name("y0").GPUMem(8).Node("y").Placement(`{"0":{"0":8}}`).Obj(),
		st.MakePod().Name("y1").GPUMem(1).Node("y").Placement(`{"0":{"1":1}}`).Obj(),
	}
	names := []string{"x", "y", "z"}
	e := newEnv(t, "binpack", nodes, bound...)
	got, err := e.ext.Prioritize(e.ctx, &extenderv1.ExtenderArgs{Pod: st.MakePod().GPUMem(4).Obj(), NodeNames: &names})
	if err != nil {
		t.Fatal(err)
	}
	want := extenderv1.HostPriorityList{{Host: "x", Score: 9}, {Host: "y", Score: 10}, {Host: "z", Score: 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prioritize() (-want,+got):\n%s", diff)
	}
}

// TestPassesReuseNoState: filter and prioritize reuse working memory between calls; a call over
// a few nodes after one over many (and the reverse, in parallel chunks) answers as a fresh
// extender does.
func TestPassesReuseNoState(t *testing.T) {
	var nodes []*v1.Node
	var bound []*v1.Pod
	var many []string
	for i := range 600 { // enough for parallel chunks
		name := fmt.Sprintf("n%03d", i)
		nodes = append(nodes, st.MakeNode(name).GPUs(16).Obj())
		used := int64(i % 17)
		if used > 0 {
			bound = append(bound, st.MakePod().Name("p-"+name).GPUMem(used).Node(name).Placement(fmt.Sprintf(`{"0":{"0":%d}}`, used)).Obj())
		}
		many = append(many, name)
	}
	few := []string{"n016", "n003", "ghost", "n015"}
	pod := st.MakePod().GPUMem(4).Obj()
	reused := newEnv(t, "binpack", nodes, bound...)
	for _, names := range [][]string{many, few, many, few} {
		fresh := newEnv(t, "binpack", nodes, bound...)
		args := func() *extenderv1.ExtenderArgs {
			return &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names}
		}
		if diff := cmp.Diff(fresh.ext.Filter(fresh.ctx, args()), reused.ext.Filter(reused.ctx, args())); diff != "" {
			t.Errorf("Filter over %d nodes (-fresh,+reused):\n%s", len(names), diff)
		}
		want, err := fresh.ext.Prioritize(fresh.ctx, args())
		if err != nil {
			t.Fatal(err)
		}
		got, err := reused.ext.Prioritize(reused.ctx, args())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Prioritize over %d nodes (-fresh,+reused):\n%s", len(names), diff)
		}
	}
	got, _ := reused.ext.Prioritize(reused.ctx, &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &few})
	want := extenderv1.HostPriorityList{{Host: "n016", Score: 0}, {Host: "n003", Score: 5}, {Host: "ghost"}, {Host: "n015", Score: 0}}
	// n016 (16 used) and n015 (15 used) cannot take 4; n003 is the only fit, hence the best.
	want[1].Score = extenderv1.MaxExtenderPriority
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prioritize(few) (-want,+got):\n%s", diff)
	}
}

// TestPrioritizeConcurrentShapes: concurrent prioritize calls for pods of different shapes share
// the fragmentation policies' per-node memo, while the policy is synced with the nodes; each
// still gets the answer it gets alone.
func TestPrioritizeConcurrentShapes(t *testing.T) {
	var nodes []*v1.Node
	var bound []*v1.Pod
	var names []string
	for i := range 300 {
		name := fmt.Sprintf("n%03d", i)
		nodes = append(nodes, st.MakeNode(name).GPUs(16, 16, 32, 32).Obj())
		for g, used := range []int64{int64(i % 13), int64(i % 7), int64(i % 29), 0} {
			if used > 0 {
				bound = append(bound, st.MakePod().Name(fmt.Sprintf("p-%s-%d", name, g)).GPUMem(used).CPU(1000*used, 1<<30).Node(name).
					Placement(fmt.Sprintf(`{"0":{"%d":%d}}`, g, used)).Obj())
			}
		}
		names = append(names, name)
	}
	pods := []*v1.Pod{st.MakePod().Name("a").GPUMem(4).Obj(), st.MakePod().Name("b").GPUMem(10).CPU(8000, 1<<30).Obj(),
		st.MakePod().Name("c").GPUMem(4).CPU(30000, 1<<30).Obj()}
	for _, policy := range []string{"fgd", "fgd-online"} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t, policy, nodes, bound...)
			e.ext.Relearn()
			want := make([]extenderv1.HostPriorityList, len(pods))
			for i, p := range pods {
				alone := newEnv(t, policy, nodes, bound...)
				alone.ext.Relearn()
				var err error
				if want[i], err = alone.ext.Prioritize(alone.ctx, &extenderv1.ExtenderArgs{Pod: p, NodeNames: &names}); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			syncer := make(chan struct{})
			go func() { // the periodic policy sync, as often as it can
				defer close(syncer)
				for {
					select {
					case <-stop:
						return
					default:
						e.ext.SyncPolicy()
					}
				}
			}()
			for w := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range 10 {
						i := (w + r) % len(pods)
						got, err := e.ext.Prioritize(e.ctx, &extenderv1.ExtenderArgs{Pod: pods[i], NodeNames: &names})
						if err != nil {
							t.Error(err)
							return
						}
						if diff := cmp.Diff(want[i], got); diff != "" {
							t.Errorf("pod %s, concurrent (-alone,+concurrent):\n%s", pods[i].Name, diff)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			<-syncer
		})
	}
}
