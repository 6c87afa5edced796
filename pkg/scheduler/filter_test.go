package scheduler_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

func TestFilter(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("small").GPUs(8, 8).Obj(),
		st.MakeNode("big").GPUs(16, 32).Obj(),
		st.MakeNode("sick").GPUs(32).Unhealthy(0).Obj(),
		st.MakeNode("cpu").Obj(),
	}
	bound := []*v1.Pod{st.MakePod().Name("x").GPUMem(5).Node("small").Placement(`{"0":{"0":5}}`).Obj(),
		st.MakePod().Name("y").GPUMem(5).Node("small").Placement(`{"0":{"1":5}}`).Obj()}
	all := []string{"small", "big", "sick", "cpu", "ghost"}
	tests := []struct {
		name  string
		pod   *v1.Pod
		nodes []string
		want  *extenderv1.ExtenderFilterResult
	}{
		{name: "fits on big only", pod: st.MakePod().Name("p").GPUMem(6).Obj(), nodes: all,
			want: &extenderv1.ExtenderFilterResult{NodeNames: &[]string{"big"},
				FailedNodes: extenderv1.FailedNodesMap{"small": "GPU memory: no GPU has 6 GiB free"},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"sick":  "GPU memory: all GPUs of the node are unhealthy",
					"cpu":   "GPU memory: node has no shared GPUs",
					"ghost": "GPU memory: node is not a GPU-sharing node known to the extender"}}},
		{name: "only the nodes asked are answered", pod: st.MakePod().Name("p").GPUMem(2).Obj(), nodes: []string{"small"},
			want: &extenderv1.ExtenderFilterResult{NodeNames: &[]string{"small"},
				FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}}},
		{name: "pod without gpu-mem passes everywhere", pod: st.MakePod().Name("p").Container().Obj(), nodes: all,
			want: &extenderv1.ExtenderFilterResult{NodeNames: &all,
				FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}}},
		{name: "invalid request fails everywhere with the reason", pod: st.MakePod().Name("p").GPUMem(4).Annotation(contract.DefaultGPUsPerContainer, "x").Obj(),
			nodes: []string{"big"},
			want: &extenderv1.ExtenderFilterResult{NodeNames: &[]string{},
				FailedNodes: extenderv1.FailedNodesMap{},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{
					"big": `invalid gpu-mem request: annotation gpushare.io/gpu-count="x" must be an integer from 1 to 64`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "binpack", nodes, bound...)
			names := append([]string(nil), tt.nodes...)
			got := e.ext.Filter(e.ctx, &extenderv1.ExtenderArgs{Pod: tt.pod, NodeNames: &names})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Filter() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestFilterWithNodeObjects(t *testing.T) {
	e := newEnv(t, "binpack", []*v1.Node{st.MakeNode("a").GPUs(8).Obj(), st.MakeNode("b").GPUs(16).Obj()})
	list := &v1.NodeList{Items: []v1.Node{*st.MakeNode("a").Obj(), *st.MakeNode("b").Obj()}}
	got := e.ext.Filter(e.ctx, &extenderv1.ExtenderArgs{Pod: st.MakePod().GPUMem(10).Obj(), Nodes: list})
	if got.NodeNames != nil || got.Nodes == nil || len(got.Nodes.Items) != 1 || got.Nodes.Items[0].Name != "b" {
		t.Errorf("Filter() with Nodes = %+v, want Nodes [b] and no NodeNames", got)
	}
}
