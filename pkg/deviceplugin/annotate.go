package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
)

// patchAnnotations merges annotations into a pod and returns the patched pod.
func (p *Plugin) patchAnnotations(ctx context.Context, pod *v1.Pod, ann map[string]string) (*v1.Pod, error) {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return nil, fmt.Errorf("encode pod annotation patch: %w", err)
	}
	out, err := p.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("patch pod %s: %w", klog.KObj(pod), err)
	}
	return out, nil
}

// patchPlacement rewrites a pod's placement and the single-GPU annotations derived from it,
// and returns the patched pod.
func (p *Plugin) patchPlacement(ctx context.Context, pod *v1.Pod, alloc contract.Allocation) (*v1.Pod, error) {
	raw, err := json.Marshal(alloc)
	if err != nil {
		return nil, fmt.Errorf("encode placement: %w", err)
	}
	ann := map[string]string{contract.AnnotationAllocation: string(raw)}
	if gpus := alloc.GPUs(); len(gpus) > 0 {
		ann[contract.AnnotationIndex] = strconv.Itoa(gpus[0])
		if card, ok := p.inv.lookup(gpus[0]); ok {
			ann[contract.AnnotationDev] = strconv.FormatInt(card.units, 10)
		}
	}
	return p.patchAnnotations(ctx, pod, ann)
}
