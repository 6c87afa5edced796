package sim

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// agreementState is a small cluster part-filled by the simulator: 3 nodes of 4 cards.
func agreementState(t *testing.T, policy placement.Policy) (cache.Cache, *placer, contract.Names) {
	t.Helper()
	names := contract.DefaultNames()
	nodes := synthNodes(3, 4)
	nodes[2].MilliCPU = 3000
	_, ctx := ktesting.NewTestContext(t)
	c := cache.New(names, klog.FromContext(ctx))
	if err := newCluster(nodes, &names, c, false); err != nil {
		t.Fatal(err)
	}
	p := newPlacer(nodes, c, policy, []int{2, 0, 1})
	p.extenderTies = true // the extender's tie order
	for i, milli := range []int64{470, 810, 1000, 470, 300, 810} {
		pod := Pod{Name: "seed", MilliCPU: 1000, MemoryMiB: 256, NumGPU: 1, GPUMilli: milli}
		if _, err := p.submit(PodObject(&pod, i, &names), &names); err != nil {
			t.Fatal(err)
		}
	}
	return c, p, names
}

// TestSimulatorAndExtenderAgree: for the same cache state, the extender's Filter passes the
// nodes the simulator finds feasible, the node the simulator picks (with the extender's tie
// order, --tie-order=extender) is the one node Prioritize gives the top score, and Bind on that
// node takes the same cards as the simulator.
func TestSimulatorAndExtenderAgree(t *testing.T) {
	tests := []struct {
		name string
		pod  Pod
	}{
		{"sharing pod", Pod{Name: "share", MilliCPU: 2000, MemoryMiB: 512, NumGPU: 1, GPUMilli: 470}},
		{"small sharing pod", Pod{Name: "small", MilliCPU: 500, MemoryMiB: 512, NumGPU: 1, GPUMilli: 160}},
		{"whole card", Pod{Name: "whole", MilliCPU: 4000, MemoryMiB: 512, NumGPU: 1, GPUMilli: 1000}},
		{"two cards", Pod{Name: "two", MilliCPU: 1000, MemoryMiB: 512, NumGPU: 2, GPUMilli: 1000}},
		{"no GPU", Pod{Name: "cpu", MilliCPU: 1000, MemoryMiB: 512}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy, err := policies.NewRegistry().New(policies.Default)
			if err != nil {
				t.Fatal(err)
			}
			c, p, names := agreementState(t, policy)
			pod := PodObject(&tt.pod, 100, &names)
			req, res, err := podRequest(pod, &names)
			if err != nil {
				t.Fatal(err)
			}
			simChoice, ok := p.choose(placement.NewDecision(policy, &req, res), pod)
			if !ok {
				t.Fatal("simulator placed nothing")
			}
			simNode := simChoice.Node.Name
			simAlloc := simChoice.Plan.Allocation(simChoice.Node, &req)

			client := fake.NewClientset(pod)
			ext := scheduler.NewExtender(c, client, policy, names)
			_, ctx := ktesting.NewTestContext(t)
			nodeNames := cpuFit(c, p, res) // kube-scheduler's own filters run before the extender's
			filtered := ext.Filter(ctx, &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &nodeNames})
			scores, err := ext.Prioritize(ctx, &extenderv1.ExtenderArgs{Pod: pod, NodeNames: filtered.NodeNames})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(feasible(c, p, &req, res), *filtered.NodeNames); diff != "" {
				t.Errorf("filter (-simulator,+extender):\n%s", diff)
			}
			if got := bestHosts(scores); !slices.Equal(got, []string{simNode}) {
				t.Fatalf("extender's best nodes %v, simulator chose %s (scores %v)", got, simNode, scores)
			}
			err = ext.Bind(ctx, &extenderv1.ExtenderBindingArgs{PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: pod.UID, Node: simNode})
			if req.Empty() { // kube-scheduler binds it (the extender only scores it) and nothing is charged
				if !errors.Is(err, scheduler.ErrNotManaged) {
					t.Fatalf("Bind of a pod without gpu-mem = %v, want ErrNotManaged", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			info, _ := c.Pod(pod.UID)
			if diff := cmp.Diff(simAlloc, info.Allocation); diff != "" {
				t.Errorf("allocation (-simulator,+extender):\n%s", diff)
			}
		})
	}
}

// feasible lists the nodes the simulator would consider for the pod.
func feasible(c cache.Cache, p *placer, req *contract.PodRequest, res placement.PodResources) []string {
	var out []string
	d := placement.NewDecision(p.policy, req, res)
	for i, n := range c.Lookup(p.names) {
		if _, fits := d.Score(n, &placement.Plan{}); fits && podFits(n, res) {
			out = append(out, p.names[i])
		}
	}
	return out
}

// cpuFit lists the nodes with the pod's CPU and memory free.
func cpuFit(c cache.Cache, p *placer, res placement.PodResources) []string {
	var out []string
	for i, n := range c.Lookup(p.names) {
		if podFits(n, res) {
			out = append(out, p.names[i])
		}
	}
	return out
}

// bestHosts lists the hosts with the highest score.
func bestHosts(scores extenderv1.HostPriorityList) []string {
	var best []string
	top := int64(-1)
	for _, s := range scores {
		switch {
		case s.Score > top:
			best, top = []string{s.Host}, s.Score
		case s.Score == top:
			best = append(best, s.Host)
		}
	}
	return best
}
