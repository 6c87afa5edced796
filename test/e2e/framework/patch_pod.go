package framework

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
)

// PatchPod applies a JSON patch to pod as the API server would (client-go's object tracker
// uses the same JSON patch library), through tracker, and returns the result; pod itself and
// the tracker are left unchanged. The benchmarks use it to create pods in the form DRA mode's
// webhook gives them (draconvert.Convert's patch) without the webhook in the path.
func PatchPod(tracker clienttesting.ObjectTracker, pod *v1.Pod, patch []byte) (*v1.Pod, error) {
	if err := tracker.Add(pod.DeepCopy()); err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	gvr := v1.SchemeGroupVersion.WithResource("pods")
	defer func() { _ = tracker.Delete(gvr, pod.Namespace, pod.Name) }() // it is there: Add succeeded
	_, obj, err := clienttesting.ObjectReaction(tracker)(clienttesting.NewPatchAction(gvr, pod.Namespace, pod.Name, types.JSONPatchType, patch))
	if err != nil {
		return nil, fmt.Errorf("apply the DRA patch to pod %s: %w", pod.Name, err)
	}
	out, ok := obj.(*v1.Pod)
	if !ok {
		return nil, fmt.Errorf("apply the DRA patch to pod %s: got a %T", pod.Name, obj)
	}
	out.ResourceVersion = "" // the tracker's, not the API server's
	return out, nil
}
