package contract

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// MaxUnitsPerContainer bounds one container's ask; anything larger is a mistake such as "10G"
// (10^10) written for "10 GiB".
const MaxUnitsPerContainer = 1 << 20

// MaxGPUsPerContainer bounds the gpu-count annotation.
const MaxGPUsPerContainer = 64

// ErrInvalidRequest is wrapped by every request parsing error.
var ErrInvalidRequest = errors.New("invalid gpu-mem request")

// ContainerRequest is one container's ask for GPU memory.
type ContainerRequest struct {
	// Key identifies the container in an Allocation: "0", "1", … for app containers by index,
	// "init-0", … for init containers.
	Key string
	// Name is the container's name.
	Name string
	// Init is true for init containers.
	Init bool
	// Units is the container's total ask.
	Units int64
	// GPUs is the number of cards the units are split over evenly.
	GPUs int
}

// PerGPU is the units the container takes on each of its cards.
func (c ContainerRequest) PerGPU() int64 { return c.Units / int64(c.GPUs) }

// PodRequest is what a pod asks: its gpu-mem containers and the GPU models it accepts.
type PodRequest struct {
	// Containers lists the containers that ask gpu-mem, init containers first.
	Containers []ContainerRequest
	// Models lists the accepted GPU models; empty means any.
	Models []string
}

// Empty is true when the pod asks no GPU memory.
func (r *PodRequest) Empty() bool { return len(r.Containers) == 0 }

// TotalUnits is the pod's effective ask as Kubernetes counts it: the larger of the largest init
// container and the sum of the app containers.
func (r *PodRequest) TotalUnits() int64 {
	var initMax, apps int64
	for _, c := range r.Containers {
		if c.Init {
			initMax = max(initMax, c.Units)
		} else {
			apps += c.Units
		}
	}
	return max(initMax, apps)
}

// AcceptsModel reports whether a GPU of the given model may serve the pod.
func (r *PodRequest) AcceptsModel(model string) bool {
	if len(r.Models) == 0 {
		return true
	}
	for _, m := range r.Models {
		if ModelMatches(m, model) {
			return true
		}
	}
	return false
}

// ParseRequest reads a pod's gpu-mem ask. A pod that asks nothing gives an empty request and no
// error.
func ParseRequest(pod *v1.Pod, names *Names) (PodRequest, error) {
	gpus, err := gpusPerContainer(pod, names)
	if err != nil {
		return PodRequest{}, err
	}
	var req PodRequest
	for i := range pod.Spec.InitContainers {
		if err := req.add(&pod.Spec.InitContainers[i], "init-"+strconv.Itoa(i), true, gpus, names); err != nil {
			return PodRequest{}, err
		}
	}
	for i := range pod.Spec.Containers {
		if err := req.add(&pod.Spec.Containers[i], strconv.Itoa(i), false, gpus, names); err != nil {
			return PodRequest{}, err
		}
	}
	if v, ok := pod.Annotations[names.ModelAnnotation]; ok && !req.Empty() {
		req.Models = ParseModels(v)
		if len(req.Models) == 0 {
			return PodRequest{}, fmt.Errorf("%w: annotation %s=%q names no model", ErrInvalidRequest, names.ModelAnnotation, v)
		}
	}
	return req, nil
}

func (r *PodRequest) add(c *v1.Container, key string, init bool, gpus int, names *Names) error {
	units, ok, err := containerUnits(c, names)
	if err != nil || !ok {
		return err
	}
	if units%int64(gpus) != 0 {
		return fmt.Errorf("%w: container %q asks %d units of %s, which do not split evenly over %d GPUs",
			ErrInvalidRequest, c.Name, units, names.Resource, gpus)
	}
	r.Containers = append(r.Containers, ContainerRequest{Key: key, Name: c.Name, Init: init, Units: units, GPUs: gpus})
	return nil
}

// containerUnits reads one container's units; ok is false when it asks none.
func containerUnits(c *v1.Container, names *Names) (int64, bool, error) {
	lim, hasLim := c.Resources.Limits[names.Resource]
	reqQ, hasReq := c.Resources.Requests[names.Resource]
	if !hasLim && !hasReq {
		return 0, false, nil
	}
	if !hasLim {
		return 0, false, fmt.Errorf("%w: container %q sets requests.%s without limits; set limits", ErrInvalidRequest, c.Name, names.Resource)
	}
	if hasReq && reqQ.Cmp(lim) != 0 {
		return 0, false, fmt.Errorf("%w: container %q: requests.%s=%s differs from limits %s; they must be equal",
			ErrInvalidRequest, c.Name, names.Resource, reqQ.String(), lim.String())
	}
	units, ok := lim.AsInt64()
	switch {
	case !ok || lim.MilliValue()%1000 != 0:
		return 0, false, fmt.Errorf("%w: container %q: %s=%s is not a whole number of units (one unit is %s)",
			ErrInvalidRequest, c.Name, names.Resource, lim.String(), names.Unit.String())
	case units <= 0:
		return 0, false, fmt.Errorf("%w: container %q: %s=%s must be positive", ErrInvalidRequest, c.Name, names.Resource, lim.String())
	case units > MaxUnitsPerContainer:
		return 0, false, fmt.Errorf("%w: container %q: %s=%s is %d units of %s; quantities count units, so write 10 for 10 units, not 10G (10^10)",
			ErrInvalidRequest, c.Name, names.Resource, lim.String(), units, names.Unit.String())
	}
	return units, true, nil
}

func gpusPerContainer(pod *v1.Pod, names *Names) (int, error) {
	v, ok := pod.Annotations[names.GPUCountAnnotation]
	if !ok {
		return 1, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > MaxGPUsPerContainer {
		return 0, fmt.Errorf("%w: annotation %s=%q must be an integer from 1 to %d", ErrInvalidRequest, names.GPUCountAnnotation, v, MaxGPUsPerContainer)
	}
	return n, nil
}

// ParseModels splits a model constraint such as "A100|H100" into its entries.
func ParseModels(v string) []string {
	var out []string
	for _, m := range strings.Split(v, "|") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// ModelMatches reports whether a constraint entry names a GPU model. Both are split into
// alphanumeric tokens, case-insensitively; the entry matches when its tokens appear as a
// contiguous run in the model's. So "A100" and "a100-sxm4" match "NVIDIA A100-SXM4-40GB", while
// "A10" does not.
func ModelMatches(entry, model string) bool {
	e, m := modelTokens(entry), modelTokens(model)
	if len(e) == 0 {
		return false
	}
	for i := 0; i+len(e) <= len(m); i++ {
		if equalTokens(e, m[i:i+len(e)]) {
			return true
		}
	}
	return false
}

func modelTokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isLowerAlnum(r) })
}

// isLowerAlnum reports whether r is an ASCII lowercase letter or digit.
func isLowerAlnum(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }

func equalTokens(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
