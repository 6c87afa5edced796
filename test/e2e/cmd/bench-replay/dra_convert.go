package main

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// converter turns each gpu-mem pod of the sequence into what DRA mode's admission step makes of
// it (pkg/draconvert): the claim templates exist in the pod's namespace, and the pod is patched
// to claim them. The webhook that does this in a cluster (config/dra/webhook.yaml) is not run:
// the conversion is the same function, called here before the pod is created.
type converter struct {
	cfg     draconvert.Config
	ensurer *draconvert.TemplateEnsurer
	// ensured are the templates known to exist, by namespace and name; each is named after its
	// spec, so one that exists never needs reading again.
	ensured map[types.NamespacedName]bool
	// tracker holds a pod while its patch is applied (patchPod).
	tracker clienttesting.ObjectTracker
}

// newConverter converts with cfg and makes the templates exist through client.
func newConverter(client kubernetes.Interface, cfg draconvert.Config) *converter {
	return &converter{cfg: cfg, ensurer: draconvert.NewTemplateEnsurer(client, 0), ensured: map[types.NamespacedName]bool{},
		tracker: clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())}
}

// convert returns pod as DRA mode's admission step admits it, having made its templates exist;
// a pod without gpu-mem comes back as it is. Not safe for concurrent use.
func (c *converter) convert(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	conv, err := draconvert.Convert(pod, &c.cfg)
	if err != nil {
		return nil, fmt.Errorf("convert pod %s: %w", pod.Name, err)
	}
	if len(conv.Claims) == 0 {
		return pod, nil
	}
	if err := c.ensure(ctx, pod.Namespace, conv.Templates()); err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	return framework.PatchPod(c.tracker, pod, conv.Patch)
}

// ensure makes the templates not yet known to exist exist in namespace.
func (c *converter) ensure(ctx context.Context, namespace string, templates []*resourcev1.ResourceClaimTemplate) error {
	var missing []*resourcev1.ResourceClaimTemplate
	for _, t := range templates {
		if !c.ensured[types.NamespacedName{Namespace: namespace, Name: t.Name}] {
			missing = append(missing, t)
		}
	}
	if err := c.ensurer.Ensure(ctx, namespace, missing); err != nil {
		return err
	}
	for _, t := range missing {
		c.ensured[types.NamespacedName{Namespace: namespace, Name: t.Name}] = true
	}
	return nil
}
