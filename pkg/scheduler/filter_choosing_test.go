package scheduler_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// TestFilterChoosing: with WithFilterChoosing, Filter answers a gpu-mem pod with exactly the
// node Prioritize gives the top score (whatever the policy, whatever the order of the request),
// answers a pod that fits nowhere with every node's reason, and lets a pod without gpu-mem pass
// everywhere.
func TestFilterChoosing(t *testing.T) {
	var nodes []*v1.Node
	var bound []*v1.Pod
	var names []string
	for i := range 12 {
		n := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, st.MakeNode(n).GPUs(16, 16).Obj())
		names = append(names, n)
		if used := i % 4; used > 0 { // a quarter of the nodes empty, the rest 3-9 GiB used on GPU0
			bound = append(bound, st.MakePod().Name("u"+n).GPUMem(int64(3*used)).Node(n).Placement(fmt.Sprintf(`{"0":{"0":%d}}`, 3*used)).Obj())
		}
	}
	reversed := make([]string, len(names))
	for i, n := range names {
		reversed[len(names)-1-i] = n
	}
	for _, policy := range []string{"binpack", "spread", "fgd", "fgd-online"} {
		for _, order := range [][]string{names, reversed} {
			for size := 1; size <= 16; size += 5 {
				t.Run(fmt.Sprintf("%s/%s-first/%dGiB", policy, order[0], size), func(t *testing.T) {
					e := newEnvOpts(t, newPolicy(t, policy), []scheduler.Option{scheduler.WithFilterChoosing(true)}, nodes, bound...)
					pod := st.MakePod().Name(fmt.Sprintf("p%d", size)).GPUMem(int64(size)).Obj()
					args := func() *extenderv1.ExtenderArgs {
						o := append([]string(nil), order...)
						return &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &o}
					}
					prio, err := e.ext.Prioritize(e.ctx, args())
					if err != nil {
						t.Fatal(err)
					}
					var top []string
					for _, hp := range prio {
						if hp.Score == extenderv1.MaxExtenderPriority {
							top = append(top, hp.Host)
						}
					}
					got := e.ext.Filter(e.ctx, args())
					want := &extenderv1.ExtenderFilterResult{NodeNames: &top,
						FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("Filter() (-want,+got):\n%s", diff)
					}
					if len(top) != 1 {
						t.Errorf("Prioritize gave the top score to %v, want one node", top)
					}
				})
			}
		}
	}

	t.Run("fits nowhere: every node's reason, as without choosing", func(t *testing.T) {
		small := []*v1.Node{st.MakeNode("a").GPUs(8).Obj(), st.MakeNode("b").GPUs(4, 4).Obj(), st.MakeNode("c").Obj()}
		filter := func(opts ...scheduler.Option) *extenderv1.ExtenderFilterResult {
			e := newEnvOpts(t, newPolicy(t, "binpack"), opts, small)
			names := []string{"a", "b", "c", "ghost"}
			return e.ext.Filter(e.ctx, &extenderv1.ExtenderArgs{Pod: st.MakePod().Name("p").GPUMem(10).Obj(), NodeNames: &names})
		}
		got, want := filter(scheduler.WithFilterChoosing(true)), filter()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Filter() choosing (-without,+with):\n%s", diff)
		}
		if len(got.FailedAndUnresolvableNodes)+len(got.FailedNodes) != 4 {
			t.Errorf("Filter() gave reasons for %d nodes, want 4: %+v", len(got.FailedAndUnresolvableNodes)+len(got.FailedNodes), got)
		}
	})

	t.Run("pod without gpu-mem passes everywhere", func(t *testing.T) {
		e := newEnvOpts(t, newPolicy(t, "binpack"), []scheduler.Option{scheduler.WithFilterChoosing(true)}, nodes)
		all := append([]string(nil), names...)
		got := e.ext.Filter(e.ctx, &extenderv1.ExtenderArgs{Pod: st.MakePod().Name("p").Container().Obj(), NodeNames: &all})
		if diff := cmp.Diff(names, *got.NodeNames); diff != "" {
			t.Errorf("Filter().NodeNames (-want,+got):\n%s", diff)
		}
	})
}
