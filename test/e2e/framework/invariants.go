package framework

import (
	"context"
	"fmt"
	"strconv"

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
	// Differences are the extender's audit findings (cache against the API server).
	Differences []string
}

// OK is true when nothing is wrong.
func (i Invariants) OK() bool {
	return len(i.Overcommitted) == 0 && i.Unannotated == 0 && len(i.Differences) == 0
}

func (i Invariants) String() string {
	return fmt.Sprintf("%d cards over capacity %v, %d bound GPU pods without a placement, %d differences between cache and API %v",
		len(i.Overcommitted), i.Overcommitted, i.Unannotated, len(i.Differences), i.Differences)
}

// CheckInvariants reads every node's cards and every pod of namespace from the API server, adds up
// the placements of the bound gpu-mem pods per card, and, when ext is not nil, asks the extender's
// audit for the differences between its cache and the API server.
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
	used := map[string]int64{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		req, err := contract.ParseRequest(pod, &names)
		if err != nil {
			return inv, fmt.Errorf("pod %s: %w", pod.Name, err)
		}
		if pod.Spec.NodeName == "" || len(req.Containers) == 0 {
			continue
		}
		alloc, ok, err := contract.AllocationFromPod(pod, &req)
		if err != nil || !ok {
			inv.Unannotated++
			continue
		}
		for g, u := range alloc.PerGPU() {
			used[pod.Spec.NodeName+"/"+strconv.Itoa(g)] += u
		}
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
