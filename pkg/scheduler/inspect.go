package scheduler

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

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
// every node and pod, and in DRA mode the driver's ResourceSlices and every ResourceClaim, so
// it is for debugging and tests, not for every scrape. They are read page by page into the
// truth (feed.EachNodePage, feed.EachPodPage, ...), never held whole; in DRA mode through the
// same DRAFeed as the cache's.
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
	if e.dra {
		if err := e.auditDRA(ctx, truth); err != nil {
			return cache.AuditReport{}, err
		}
	}
	return truth.Compare(e.cache), nil
}

// auditDRA adds the driver's cards and the claims' charges to the truth: the slices first, as
// a claim is charged to the cards its node's slices publish.
func (e *Extender) auditDRA(ctx context.Context, truth *cache.AuditTruth) error {
	f := feed.NewDRAFeed(truth.Target(), e.draDriver, e.names, klog.FromContext(ctx).V(10))
	if _, err := feed.EachSlicePage(ctx, e.client.ResourceV1().ResourceSlices(), metav1.ListOptions{}, func(slices []resourceapi.ResourceSlice) error {
		for i := range slices {
			f.SetSlice(&slices[i])
		}
		return nil
	}); err != nil {
		return fmt.Errorf("audit: list ResourceSlices: %w", err)
	}
	if _, err := feed.EachClaimPage(ctx, e.client.ResourceV1().ResourceClaims(metav1.NamespaceAll), metav1.ListOptions{}, func(claims []resourceapi.ResourceClaim) error {
		for i := range claims {
			f.SetClaim(&claims[i])
		}
		return nil
	}); err != nil {
		return fmt.Errorf("audit: list ResourceClaims: %w", err)
	}
	return nil
}
