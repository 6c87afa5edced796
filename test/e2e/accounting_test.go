package e2e

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// usage is node → GPU index → units held, as the pods' annotations say.
type usage map[string]map[int]int64

func (u usage) add(node string, gpu int, units int64) {
	if u[node] == nil {
		u[node] = map[int]int64{}
	}
	u[node][gpu] += units
}

func (u usage) String() string {
	var nodes []string
	for n := range u {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var b strings.Builder
	for _, n := range nodes {
		var gpus []int
		for g := range u[n] {
			gpus = append(gpus, g)
		}
		sort.Ints(gpus)
		fmt.Fprintf(&b, "%s:", n)
		for _, g := range gpus {
			fmt.Fprintf(&b, " GPU%d=%d", g, u[n][g])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// holdsMemory follows the contract's accounting: a pod holds its memory from bind until it is
// Succeeded/Failed or gone.
func holdsMemory(p *v1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// apiUsage reads every bound gpu-mem pod's placement from its annotations. A bound pod without
// a valid placement is an error: the extender must annotate before it binds.
func (e *env) apiUsage() (usage, []v1.Pod, error) {
	names := contract.DefaultNames()
	list, err := e.c.Client.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	u := usage{}
	var pods []v1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if !holdsMemory(p) {
			continue
		}
		req, err := contract.ParseRequest(p, &names)
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		if req.Empty() {
			continue
		}
		alloc, ok, err := contract.AllocationFromPod(p, &req)
		if err != nil || !ok {
			//nolint:errorlint // err is nil when only ok is false: %v prints <nil> where %w would not.
			return nil, nil, fmt.Errorf("bound pod %s on %s has no valid placement (ok=%v): %v; annotations %v",
				p.Name, p.Spec.NodeName, ok, err, p.Annotations)
		}
		if !alloc.Matches(&req) {
			return nil, nil, fmt.Errorf("pod %s: placement %v does not match its request", p.Name, alloc)
		}
		for gpu, units := range alloc.PerGPU() {
			u.add(p.Spec.NodeName, gpu, units)
		}
		pods = append(pods, *p)
	}
	return u, pods, nil
}

// overCapacity lists every card whose pods hold more than the card has.
func overCapacity(u usage, cards map[string][]contract.GPU) []string {
	var bad []string
	for node, gpus := range u {
		for idx, used := range gpus {
			capacity := int64(-1)
			for _, g := range cards[node] {
				if g.Index == idx {
					capacity = g.Units
				}
			}
			if used > capacity {
				bad = append(bad, fmt.Sprintf("%s GPU%d holds %d of %d units", node, idx, used, capacity))
			}
		}
	}
	sort.Strings(bad)
	return bad
}
