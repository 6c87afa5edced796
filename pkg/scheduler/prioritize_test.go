package scheduler_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
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
		{name: "no gpu-mem scores nothing", policy: "binpack", pod: st.MakePod().Container().Obj(),
			want: extenderv1.HostPriorityList{{Host: "empty"}, {Host: "half"}, {Host: "full"}, {Host: "quarter"}, {Host: "ghost"}}},
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
