package usage

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
)

// ContainerLimit is the GPU memory one container may use on one card: what the share-plugin's
// Allocate handed it (its units there times the unit), read back from the pod's placement.
type ContainerLimit struct {
	Namespace, Pod, Container string
	PodUID                    types.UID
	// UUID is the card's.
	UUID string
	// Bytes is the limit.
	Bytes uint64
}

// limits lists the limit of every gpu-mem container of pods on each card of its placement.
// Pods without a valid request or placement, and cards the node does not have, are left out.
func (s *Sampler) limits(pods []*v1.Pod, idx podIndex) []ContainerLimit {
	uuidOf := make(map[int]string, len(s.cards))
	for _, d := range s.cards {
		uuidOf[d.Index] = d.UUID
	}
	unit := uint64(s.cfg.Names.UnitBytes()) //nolint:gosec // G115: Names.Validate keeps the unit positive
	var out []ContainerLimit
	for _, pod := range pods {
		req, ok := idx.requests[pod.UID]
		if !ok || req.Empty() || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		alloc, ok, err := contract.AllocationFromPod(pod, &req)
		if err != nil || !ok {
			continue
		}
		for _, c := range req.Containers {
			for g, units := range alloc[c.Key] {
				uuid, known := uuidOf[g]
				if !known || units <= 0 {
					continue
				}
				out = append(out, ContainerLimit{Namespace: pod.Namespace, Pod: pod.Name, Container: c.Name, PodUID: pod.UID,
					UUID: uuid, Bytes: uint64(units) * unit})
			}
		}
	}
	SortLimits(out)
	return out
}

// SortLimits sorts l by namespace, pod, container and card UUID, the order of Snapshot.Limits.
func SortLimits(l []ContainerLimit) {
	sort.Slice(l, func(i, j int) bool {
		a, b := &l[i], &l[j]
		if ka, kb := a.Namespace+"/"+a.Pod+"/"+a.Container, b.Namespace+"/"+b.Pod+"/"+b.Container; ka != kb {
			return ka < kb
		}
		return a.UUID < b.UUID
	})
}
