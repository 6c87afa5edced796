package inspect_test

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/inspect"
)

// summary is the part of a NodeReport these tests compare.
type summary struct {
	Name      string
	Cards     []string // "allocated/total"
	Pending   int64
	Allocated int64
	Total     int64
	Pods      []string // "namespace/name pending=N"
}

func summarize(r inspect.Report) []summary {
	var out []summary
	for _, n := range r.Nodes {
		s := summary{Name: n.Name, Pending: n.PendingUnits, Allocated: n.Allocated, Total: n.Total}
		for _, g := range n.GPUs {
			s.Cards = append(s.Cards, itoa(g.Allocated)+"/"+itoa(g.Total))
		}
		for _, p := range n.Pods {
			s.Pods = append(s.Pods, p.Namespace+"/"+p.Name+" pending="+itoa(p.PendingUnits))
		}
		out = append(out, s)
	}
	return out
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestBuildReport(t *testing.T) {
	oneCard := func(name string) v1.Node { return *ct.MakeNode(name).GPUs(16).Obj() }
	tests := []struct {
		name      string
		nodes     []v1.Node
		pods      []*v1.Pod
		namespace string
		want      []summary
	}{
		{
			name:  "sorted by name, CPU node left out",
			nodes: []v1.Node{oneCard("z"), *ct.MakeNode("cpu").Obj(), oneCard("a")},
			want: []summary{
				{Name: "a", Cards: []string{"0/16"}, Total: 16},
				{Name: "z", Cards: []string{"0/16"}, Total: 16},
			},
		},
		{
			name:  "placement on a card the node lacks counts as pending",
			nodes: []v1.Node{oneCard("z")},
			pods:  []*v1.Pod{ct.MakePod().Namespace("ns").Name("p").Node("z").GPUMem(2).Placement(`{"0":{"3":2}}`).Obj()},
			want:  []summary{{Name: "z", Cards: []string{"0/16"}, Pending: 2, Allocated: 2, Total: 16, Pods: []string{"ns/p pending=2"}}},
		},
		{
			name:  "terminating pod still holds its memory",
			nodes: []v1.Node{oneCard("z")},
			pods:  []*v1.Pod{ct.MakePod().Namespace("ns").Name("leaving").Node("z").GPUMem(4).Placement(`{"0":{"0":4}}`).Terminating().Obj()},
			want:  []summary{{Name: "z", Cards: []string{"4/16"}, Allocated: 4, Total: 16, Pods: []string{"ns/leaving pending=0"}}},
		},
		{
			name:  "node without cards but with a gpu-mem pod is listed",
			nodes: []v1.Node{*ct.MakeNode("cpu").Obj()},
			pods:  []*v1.Pod{ct.MakePod().Namespace("ns").Name("p").Node("cpu").GPUMem(3).Obj()},
			want:  []summary{{Name: "cpu", Pending: 3, Allocated: 3, Pods: []string{"ns/p pending=3"}}},
		},
		{
			name:      "namespace limits pods, not totals",
			nodes:     []v1.Node{oneCard("z")},
			namespace: "b",
			pods: []*v1.Pod{
				ct.MakePod().Namespace("a").Name("p").Node("z").GPUMem(2).Annotation(contract.AnnotationIndex, "0").Obj(),
				ct.MakePod().Namespace("b").Name("q").Node("z").GPUMem(3).Annotation(contract.AnnotationIndex, "0").Obj(),
			},
			want: []summary{{Name: "z", Cards: []string{"5/16"}, Allocated: 5, Total: 16, Pods: []string{"b/q pending=0"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			names := contract.DefaultNames()
			pods := make([]v1.Pod, 0, len(tc.pods))
			for _, p := range tc.pods {
				pods = append(pods, *p)
			}
			r := inspect.BuildReport(names, cache.New(names, logger), tc.nodes, pods, tc.namespace)
			if diff := cmp.Diff(tc.want, summarize(r)); diff != "" {
				t.Errorf("report (-want,+got):\n%s", diff)
			}
		})
	}
}
