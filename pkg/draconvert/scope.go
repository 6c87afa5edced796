package draconvert

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// skipReason says why a pod is admitted as written without looking further, "" when it may be
// converted. It repeats what the webhook configuration's selectors and match conditions
// already do, so that a configuration edited wrong does not convert a pod it should leave.
func (h *Handler) skipReason(pod *v1.Pod, namespace string) string {
	switch {
	case slices.Contains(h.exempt, namespace):
		return "exempt namespace"
	case pod.Labels[ModeLabel] == ModeDevicePlugin:
		return "pod label " + ModeLabel + "=" + ModeDevicePlugin
	}
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		// The kubelet's copy of a static pod: its spec is the kubelet's, and static pods
		// cannot use resource claims.
		return "mirror pod"
	}
	return ""
}

// namespaceOptedOut reports whether the namespace carries ModeLabel=ModeDevicePlugin. It asks
// the API server: an error (fail closed) refuses the pod rather than convert it against
// its namespace's choice.
func (h *Handler) namespaceOptedOut(ctx context.Context, namespace string) (bool, error) {
	ns, err := h.client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading namespace %s for its %s label: %w", namespace, ModeLabel, err)
	}
	return ns.Labels[ModeLabel] == ModeDevicePlugin, nil
}
