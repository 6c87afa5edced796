package dra

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
)

var _ usage.ShareSource = (*Driver)(nil)

// ContainerShares says what each container of pods holds of each card: for every claim the
// driver prepared and every pod it is reserved for, each container (init containers included)
// that references the claim holds all of the claim's share of each of its cards (prepare hands
// every such container the whole claim). It feeds the usage sampler: the per-container
// metrics, and where the node enforces limits, the policing of each container against its
// share. A claim several containers reference is one HAMi-core limit they share; each of them
// is policed against all of it.
func (d *Driver) ContainerShares(pods []*v1.Pod) []usage.ContainerLimit {
	byUID := make(map[types.UID]*v1.Pod, len(pods))
	for _, p := range pods {
		byUID[p.UID] = p
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []usage.ContainerLimit
	for _, rec := range d.prepared {
		for _, c := range rec.Pods {
			pod := byUID[c.UID]
			if pod == nil || pod.Namespace != rec.Namespace {
				continue
			}
			for _, name := range containersOf(pod, rec.Name) {
				for _, s := range rec.Shares {
					out = append(out, usage.ContainerLimit{Namespace: pod.Namespace, Pod: pod.Name, Container: name, PodUID: pod.UID,
						UUID: s.UUID, Bytes: uint64(s.Bytes)}) //nolint:gosec // G115: resolve keeps consumed memory positive
				}
			}
		}
	}
	usage.SortLimits(out)
	return out
}

// containersOf names the containers of pod that reference the ResourceClaim named claim,
// through a pod claim naming it or one whose template the claim was made from.
func containersOf(pod *v1.Pod, claim string) []string {
	entries := map[string]bool{}
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err == nil && name != nil && *name == claim {
			entries[pod.Spec.ResourceClaims[i].Name] = true
		}
	}
	var out []string
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, ref := range c.Resources.Claims {
				if entries[ref.Name] {
					out = append(out, c.Name)
					break
				}
			}
		}
	}
	return out
}
