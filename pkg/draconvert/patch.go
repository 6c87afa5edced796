package draconvert

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// patchOp is one operation of an RFC 6902 JSON patch.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// escapePointer escapes a key for a JSON pointer (RFC 6901): "~" first, then "/".
func escapePointer(key string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(key) }

// buildPatch is the JSON patch that turns pod into its converted form: the annotation of what
// was converted, one pod claim per container naming its template, each container's
// reference to its claim, and the gpu-mem resource gone from its limits and requests.
func buildPatch(pod *v1.Pod, claims []Claim, names *contract.Names) ([]byte, error) {
	asked := make(map[string]int64, len(claims))
	for _, c := range claims {
		asked[c.Container] = c.Units
	}
	note, err := json.Marshal(asked)
	if err != nil {
		return nil, fmt.Errorf("encoding annotation %s: %w", AnnotationConverted, err)
	}
	ops := []patchOp{setAnnotation(pod, AnnotationConverted, string(note))}
	podClaims := make([]any, 0, len(claims))
	for _, c := range claims {
		podClaims = append(podClaims, v1.PodResourceClaim{Name: c.PodClaimName, ResourceClaimTemplateName: &c.Template.Name})
	}
	ops = appendToList(ops, "/spec/resourceClaims", len(pod.Spec.ResourceClaims) > 0, podClaims)
	for _, c := range claims {
		path, ctr := containerPath(pod, c)
		if ctr == nil {
			return nil, fmt.Errorf("%w: container %q is not in the pod", ErrNotExpressible, c.Container)
		}
		res := path + "/resources"
		ops = appendToList(ops, res+"/claims", len(ctr.Resources.Claims) > 0, []any{v1.ResourceClaim{Name: c.PodClaimName}})
		key := escapePointer(string(names.Resource))
		if _, ok := ctr.Resources.Limits[names.Resource]; ok {
			ops = append(ops, patchOp{Op: "remove", Path: res + "/limits/" + key})
		}
		if _, ok := ctr.Resources.Requests[names.Resource]; ok {
			ops = append(ops, patchOp{Op: "remove", Path: res + "/requests/" + key})
		}
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding the JSON patch: %w", err)
	}
	return raw, nil
}

// setAnnotation sets annotation k to v, creating the annotations when the pod has none (an
// empty map is not in the pod's JSON either).
func setAnnotation(pod *v1.Pod, k, v string) patchOp {
	if len(pod.Annotations) == 0 {
		return patchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{k: v}}
	}
	return patchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(k), Value: v}
}

// appendToList appends items to the list at path, creating the list when it does not exist.
func appendToList(ops []patchOp, path string, exists bool, items []any) []patchOp {
	if !exists {
		return append(ops, patchOp{Op: "add", Path: path, Value: items})
	}
	for _, it := range items {
		ops = append(ops, patchOp{Op: "add", Path: path + "/-", Value: it})
	}
	return ops
}

// containerPath is the JSON pointer of c's container in pod and the container; nil when the
// pod has no such container.
func containerPath(pod *v1.Pod, c Claim) (string, *v1.Container) {
	list, field := pod.Spec.Containers, "containers"
	if c.Init {
		list, field = pod.Spec.InitContainers, "initContainers"
	}
	for i := range list {
		if list[i].Name == c.Container {
			return "/spec/" + field + "/" + strconv.Itoa(i), &list[i]
		}
	}
	return "", nil
}
