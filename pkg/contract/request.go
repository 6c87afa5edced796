package contract

import (
	"errors"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// MaxUnitsPerContainer bounds one container's ask; anything larger is a mistake such as "10G"
// (10^10) written for "10 GiB".
const MaxUnitsPerContainer = 1 << 20

// MaxGPUsPerContainer bounds the gpu-count annotation.
const MaxGPUsPerContainer = 64

// countDigits is the most digits of a gpu-count annotation: the admission policy's
// '^[0-9]{1,6}$'.
const countDigits = 6

// ErrInvalidRequest is wrapped by every request parsing error.
var ErrInvalidRequest = errors.New("invalid gpu-mem request")

// ContainerRequest is one container's ask for GPU memory (see gpumem.ContainerRequest).
type ContainerRequest = gpumem.ContainerRequest

// PodRequest is what a pod asks (see gpumem.PodRequest).
type PodRequest = gpumem.PodRequest

// ParseRequest reads a pod's gpu-mem ask. A pod that asks nothing gives an empty request and no
// error.
func ParseRequest(pod *v1.Pod, names *Names) (PodRequest, error) {
	gpus, err := gpusPerContainer(pod, names)
	if err != nil {
		return PodRequest{}, err
	}
	var req PodRequest
	for i := range pod.Spec.InitContainers {
		if err := addContainer(&req, &pod.Spec.InitContainers[i], "init-"+strconv.Itoa(i), true, gpus, names); err != nil {
			return PodRequest{}, err
		}
	}
	for i := range pod.Spec.Containers {
		if err := addContainer(&req, &pod.Spec.Containers[i], strconv.Itoa(i), false, gpus, names); err != nil {
			return PodRequest{}, err
		}
	}
	if v, ok := pod.Annotations[names.ModelAnnotation]; ok && !req.Empty() {
		models, err := parseModels(v, names)
		if err != nil {
			return PodRequest{}, err
		}
		req.SetModels(models)
	}
	if !req.Empty() {
		if _, _, err := CoreLimit(pod, names); err != nil {
			return PodRequest{}, err
		}
	}
	return req, nil
}

// parseModels splits the model annotation v into its entries, within MaxModelEntries entries
// of MaxModelEntryLength bytes; the length is checked before anything is split.
func parseModels(v string, names *Names) ([]string, error) {
	if len(v) > MaxModelEntries*(MaxModelEntryLength+1) {
		return nil, fmt.Errorf("%w: annotation %s is %d bytes long; at most %d entries of %d bytes each are accepted",
			ErrInvalidRequest, names.ModelAnnotation, len(v), MaxModelEntries, MaxModelEntryLength)
	}
	models := gpumem.ParseModels(v)
	switch {
	case len(models) == 0:
		return nil, fmt.Errorf("%w: annotation %s=%q names no model", ErrInvalidRequest, names.ModelAnnotation, v)
	case len(models) > MaxModelEntries:
		return nil, fmt.Errorf("%w: annotation %s names %d models; at most %d are accepted", ErrInvalidRequest, names.ModelAnnotation, len(models), MaxModelEntries)
	}
	for _, m := range models {
		if len(m) > MaxModelEntryLength {
			return nil, fmt.Errorf("%w: annotation %s: model %.20q... is %d bytes long; at most %d are accepted",
				ErrInvalidRequest, names.ModelAnnotation, m, len(m), MaxModelEntryLength)
		}
	}
	return models, nil
}

// addContainer appends c's ask to r, if it asks gpu-mem.
func addContainer(r *PodRequest, c *v1.Container, key string, init bool, gpus int, names *Names) error {
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
	n, valid := parseDigits(v, countDigits)
	if !valid || n < 1 || n > MaxGPUsPerContainer {
		return 0, fmt.Errorf("%w: annotation %s=%q must be an integer from 1 to %d", ErrInvalidRequest, names.GPUCountAnnotation, v, MaxGPUsPerContainer)
	}
	return n, nil
}
