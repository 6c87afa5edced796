package scheduler

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/cache/feed"
	"github.com/gpushare/gpushare/pkg/placement"
)

// What operators read of the extender's state: the cards and pods the cache holds
// (GET /inspect, Inspect), and the cache checked against the API server (GET /debug/audit,
// Extender.Audit).

// InspectResult is the JSON of GET /gpushare-scheduler/inspect.
type InspectResult struct {
	// Unit labels the units of every quantity (e.g. "GiB").
	Unit string `json:"unit"`
	// Nodes are the GPU-sharing nodes, sorted by name.
	Nodes []*placement.NodeInfo `json:"nodes"`
}

// Inspect lists the nodes that have GPUs or hold gpu-mem.
func Inspect(nodes []*placement.NodeInfo, unit string) InspectResult {
	out := InspectResult{Unit: unit, Nodes: []*placement.NodeInfo{}}
	for _, n := range nodes {
		if n.SharesGPUs() {
			out.Nodes = append(out.Nodes, n)
		}
	}
	return out
}

// Audit checks the extender's cache against the API server's truth (cache.Audit): it lists
// every node and pod, so it is for debugging and tests, not for every scrape. The nodes and
// pods are read page by page into the truth (feed.EachNodePage, feed.EachPodPage), never
// held whole.
func (e *Extender) Audit(ctx context.Context) (cache.AuditReport, error) {
	truth := cache.NewAuditTruth(e.names)
	if _, err := feed.EachNodePage(ctx, e.client.CoreV1().Nodes(), metav1.ListOptions{}, func(nodes []v1.Node) error {
		for i := range nodes {
			truth.AddNode(&nodes[i])
		}
		return nil
	}); err != nil {
		return cache.AuditReport{}, fmt.Errorf("audit: list nodes: %w", err)
	}
	if _, err := feed.EachPodPage(ctx, e.client.CoreV1().Pods(metav1.NamespaceAll), metav1.ListOptions{}, func(pods []v1.Pod) error {
		for i := range pods {
			truth.AddPod(&pods[i])
		}
		return nil
	}); err != nil {
		return cache.AuditReport{}, fmt.Errorf("audit: list pods: %w", err)
	}
	return truth.Compare(e.cache), nil
}
