package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler/fence"
)

// FenceManifests are the extender's RBAC and admission policies, the fence among them, relative
// to the repository's root: what a test or benchmark installs to run the extender under them.
func FenceManifests() []string {
	return []string{"config/extender/rbac.yaml", "config/admission/extender-pods.yaml",
		"config/admission/extender-leases.yaml", "config/admission/extender-fence.yaml"}
}

// WaitFenceInForce waits, up to timeout, until the fence policy (config/admission/
// extender-fence.yaml) refuses a dry-run Binding that client (acting as the extender's service
// account) sends in namespace under a token that is not the Lease's: the policy is loaded and
// its param, the extender's Lease, exists (a replica leads).
func WaitFenceInForce(ctx context.Context, client kubernetes.Interface, namespace string, timeout time.Duration) error {
	probe := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "fence-probe", Annotations: map[string]string{contract.AnnotationFence: "probe/0"}},
		Target: v1.ObjectReference{Kind: "Node", Name: "none"}}
	var last error
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := WaitFor(ctx, 200*time.Millisecond, "the fence policy in force", func() (bool, error) {
		last = client.CoreV1().Pods(namespace).Bind(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		var status apierrors.APIStatus
		return apierrors.IsForbidden(last) && errors.As(last, &status) && strings.Contains(status.Status().Message, fence.Policy), nil
	})
	if err != nil {
		if last == nil {
			return fmt.Errorf("the fence policy never refused a stale token: %w (the last probe was admitted)", err)
		}
		return fmt.Errorf("the fence policy never refused a stale token: %w (last answer: %w)", err, last)
	}
	return nil
}
