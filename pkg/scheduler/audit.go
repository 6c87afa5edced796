package scheduler

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/cache"
)

// Audit checks the extender's cache against the API server's truth (cache.Audit): it lists
// every node and pod, so it is for debugging and tests, not for every scrape.
func (e *Extender) Audit(ctx context.Context) (cache.AuditReport, error) {
	nodes, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return cache.AuditReport{}, fmt.Errorf("audit: list nodes: %w", err)
	}
	pods, err := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return cache.AuditReport{}, fmt.Errorf("audit: list pods: %w", err)
	}
	return cache.Audit(e.cache, nodes.Items, pods.Items, e.names), nil
}
