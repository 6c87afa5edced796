package framework

import (
	"context"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Invariants is the end-of-run check of the benchmarks: the API server's truth and the
// extender's own audit.
type Invariants struct {
	// Overcommitted lists the cards whose pods, by their annotations, hold more than the card,
	// then those the extender's audit reports.
	Overcommitted []string
	// Unannotated counts bound gpu-mem pods without a placement.
	Unannotated int
	// Mismatched lists the bound gpu-mem pods whose placement does not give each gpu-mem
	// container its ask, split evenly over its card count (gpushare.io/gpu-count), as
	// "namespace/pod: why" (contract.CheckAllocation): a forged or corrupted placement, or an
	// Allocate that handed a container another's.
	Mismatched []string
	// Differences are the extender's audit findings (cache against the API server).
	Differences []string
}

// OK is true when nothing is wrong.
func (i Invariants) OK() bool {
	return len(i.Overcommitted) == 0 && i.Unannotated == 0 && len(i.Mismatched) == 0 && len(i.Differences) == 0
}

func (i Invariants) String() string {
	return fmt.Sprintf("%d cards over capacity %v, %d bound GPU pods without a placement, %d bound GPU pods placed other than they ask %v, %d differences between cache and API %v",
		len(i.Overcommitted), i.Overcommitted, i.Unannotated, len(i.Mismatched), i.Mismatched, len(i.Differences), i.Differences)
}

// CheckInvariants reads every node's cards and every pod of namespace from the API server, checks
// that each bound gpu-mem pod's placement gives every container its ask over its card count,
// adds up the placements per card, and, when ext is not nil, asks the extender's audit for the
// differences between its cache and the API server.
func (c *Cluster) CheckInvariants(ctx context.Context, namespace string, ext *Extender) (Invariants, error) {
	var inv Invariants
	names := contract.DefaultNames()
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, err
	}
	capacity := map[string]int64{}
	for i := range nodes.Items {
		raw, ok := nodes.Items[i].Annotations[names.NodeGPUsAnnotation]
		if !ok {
			continue
		}
		gpus, err := contract.DecodeGPUs(raw)
		if err != nil {
			return inv, fmt.Errorf("node %s: %w", nodes.Items[i].Name, err)
		}
		for _, g := range gpus {
			capacity[nodes.Items[i].Name+"/"+strconv.Itoa(g.Index)] = g.Units
		}
	}
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return inv, err
	}
	used, err := inv.addPods(pods.Items, &names)
	if err != nil {
		return inv, err
	}
	for card, u := range used {
		if c, ok := capacity[card]; !ok || u > c {
			inv.Overcommitted = append(inv.Overcommitted, fmt.Sprintf("%s: %d of %d", card, u, c))
		}
	}
	if ext == nil {
		return inv, nil
	}
	var audit struct {
		Overcommitted []string `json:"overcommitted"`
		Differences   []string `json:"differences"`
	}
	if err := ext.GetJSON(ctx, ExtenderPrefix+"/debug/audit", &audit); err != nil {
		return inv, fmt.Errorf("extender audit: %w", err)
	}
	inv.Differences = audit.Differences
	inv.Overcommitted = append(inv.Overcommitted, audit.Overcommitted...)
	return inv, nil
}

// addPods checks the placements of the bound gpu-mem pods among pods (Unannotated,
// Mismatched) and returns what they hold on each card ("node/index" → units). A placement that
// does not match its request still counts, as written: it is what the cards are charged.
func (i *Invariants) addPods(pods []v1.Pod, names *contract.Names) (map[string]int64, error) {
	used := map[string]int64{}
	for k := range pods {
		pod := &pods[k]
		req, err := contract.ParseRequest(pod, names)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
		}
		if pod.Spec.NodeName == "" || len(req.Containers) == 0 {
			continue
		}
		alloc, ok, err := contract.AllocationFromPod(pod, &req)
		if err != nil || !ok {
			i.Unannotated++
			continue
		}
		if err := contract.CheckAllocation(alloc, &req); err != nil {
			i.Mismatched = append(i.Mismatched, pod.Namespace+"/"+pod.Name+": "+err.Error())
		}
		for g, u := range alloc.PerGPU() {
			used[pod.Spec.NodeName+"/"+strconv.Itoa(g)] += u
		}
	}
	return used, nil
}
