package main

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// draShapes holds, per size of ask (index units-1, 1-8 GiB), the pod in the claim form DRA
// mode's webhook admits it as (draconvert.Convert applied to the gpu-mem pod), without a name:
// every pod of a size converts alike, so the conversion runs once per size, before the burst.
type draShapes [draCardsPerNode]*v1.Pod

// newDRAShapes converts the gpu-mem pod of each size that gpuPod builds and returns the
// converted pods and the claim templates they name, each once.
func newDRAShapes(gpuPod func(units int64) *v1.Pod) (*draShapes, []*resourcev1.ResourceClaimTemplate, error) {
	cfg := draconvert.DefaultConfig(contract.DefaultNames())
	tracker := clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	var shapes draShapes
	var templates []*resourcev1.ResourceClaimTemplate
	seen := map[string]bool{}
	for i := range shapes {
		pod := gpuPod(int64(i + 1))
		conv, err := draconvert.Convert(pod, &cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("convert a %d GiB pod: %w", i+1, err)
		}
		if len(conv.Claims) == 0 {
			return nil, nil, fmt.Errorf("convert a %d GiB pod: no claim", i+1)
		}
		if shapes[i], err = framework.PatchPod(tracker, pod, conv.Patch); err != nil {
			return nil, nil, err
		}
		for _, t := range conv.Templates() {
			if !seen[t.Name] {
				seen[t.Name] = true
				templates = append(templates, t)
			}
		}
	}
	return &shapes, templates, nil
}

// pod is the converted pod of units GiB named name.
func (s *draShapes) pod(name string, units int64) *v1.Pod {
	pod := s[units-1].DeepCopy()
	pod.Name = name
	return pod
}

// ensureDRATemplates makes templates exist in the benchmark's namespace, as the webhook does.
func ensureDRATemplates(ctx context.Context, client kubernetes.Interface, templates []*resourcev1.ResourceClaimTemplate) error {
	if err := draconvert.NewTemplateEnsurer(client, 0).Ensure(ctx, namespace, templates); err != nil {
		return fmt.Errorf("claim templates: %w", err)
	}
	return nil
}

// boundAskedBytes is the GPU memory the bound pods of pods asked, by their conversion's
// annotation (draconvert.AnnotationConverted: units per container), in bytes.
func boundAskedBytes(pods []v1.Pod, unitBytes int64) (int64, error) {
	var units int64
	for i := range pods {
		p := &pods[i]
		note, ok := p.Annotations[draconvert.AnnotationConverted]
		if p.Spec.NodeName == "" || !ok {
			continue
		}
		var asked map[string]int64
		if err := json.Unmarshal([]byte(note), &asked); err != nil {
			return 0, fmt.Errorf("pod %s: annotation %s: %w", p.Name, draconvert.AnnotationConverted, err)
		}
		for _, u := range asked {
			units += u
		}
	}
	return units * unitBytes, nil
}
