package scheduler

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/pkg/placement"
)

// WithDRA runs the extender in DRA mode (docs/dra.md): nodes' cards come from the driver's
// ResourceSlices and what pods hold from their claims (pkg/cache/feed's DRAFeed), a pod's ask
// from the annotation the conversion leaves on it (draconvert.AnnotationConverted), and
// kube-scheduler's allocator chooses the card, first-fit in the order the driver publishes.
// The extender keeps choosing the node with its policy, rating each node with the card the
// allocator will take there (placement.PredictFirstFit), and never chooses or writes a card:
// it serves filter and prioritize only (no bind: kube-scheduler binds; no preempt:
// kube-scheduler's own preemption frees claims), and its GPU preemption is off. driver names
// the DRA driver whose slices and claims the cache is fed from, which Audit reads too; ""
// turns DRA mode off.
func WithDRA(driver string) Option {
	return func(o *options) {
		o.ext.dra, o.ext.draDriver = driver != "", driver
		if driver != "" {
			o.preempt.Enabled = false
		}
	}
}

// DRA reports whether the extender runs in DRA mode (WithDRA).
func (e *Extender) DRA() bool { return e.dra }

// useDRA makes e a DRA-mode extender once its options are applied: it places through the
// allocator's prediction and offers neither bind nor preempt.
func (e *Extender) useDRA() {
	e.placer = placement.PredictFirstFit(e.policy, placement.CardOrderIndex)
	e.verbs[verbBind].serve = nil
	e.verbs[verbPreempt].serve = nil
}

// request is the gpu-mem ask of a pending pod: as its spec says it, or in DRA mode as the
// conversion annotation says it (draRequest).
func (e *Extender) request(pod *v1.Pod) (contract.PodRequest, error) {
	if e.dra {
		return draRequest(pod, &e.names)
	}
	return contract.ParseRequest(pod, &e.names)
}

// draRequest reads a converted pod's ask: the units each container asked before the
// conversion took gpu-mem out of its limits (draconvert.AnnotationConverted, {"main":4}), put
// back on a copy of its containers and read with the contract's request reader, with the
// count, model and core annotations the pod still carries. A pod without the annotation asks
// nothing.
func draRequest(pod *v1.Pod, names *contract.Names) (contract.PodRequest, error) {
	raw, ok := pod.Annotations[draconvert.AnnotationConverted]
	if !ok {
		return contract.PodRequest{}, nil
	}
	var asked map[string]int64
	if err := json.Unmarshal([]byte(raw), &asked); err != nil {
		return contract.PodRequest{}, fmt.Errorf("%w: annotation %s=%q: %w", contract.ErrInvalidRequest, draconvert.AnnotationConverted, raw, err)
	}
	restored := &v1.Pod{ObjectMeta: pod.ObjectMeta}
	restored.Spec.InitContainers = withUnits(pod.Spec.InitContainers, asked, names.Resource)
	restored.Spec.Containers = withUnits(pod.Spec.Containers, asked, names.Resource)
	return contract.ParseRequest(restored, names)
}

// withUnits copies containers, with a gpu-mem limit of asked[name] on each container asked
// names. Only the names and limits are copied: all the request reader reads.
func withUnits(containers []v1.Container, asked map[string]int64, res v1.ResourceName) []v1.Container {
	out := make([]v1.Container, len(containers))
	for i := range containers {
		out[i].Name = containers[i].Name
		if units, ok := asked[containers[i].Name]; ok {
			out[i].Resources.Limits = v1.ResourceList{res: *resource.NewQuantity(units, resource.DecimalSI)}
		}
	}
	return out
}
