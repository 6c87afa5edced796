package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
)

// errUnbalanced is returned when the envs handed out cannot all be matched by annotations.
var errUnbalanced = errors.New("the envs handed out do not match the placements of the node's pods")

// slot is one gpu-mem container of a pod that is not yet assigned, with its placement.
type slot struct {
	pod   *v1.Pod
	ref   containerRef
	units int64
	init  bool
	ann   map[int]int64
}

// slotGroup is the slots that may trade placements: same size, same kind (init or app), so
// that trading keeps every card's total and the container's units in Allocate's env. Anything
// more that Allocate's answer comes to depend on (containerResponse) must be added here.
type slotGroup struct {
	units int64
	init  bool
}

// rebalance makes every container whose env is known (truths, by handout position) carry that
// env's placement in its annotation. It is the second half of Allocate: it assumes that the
// env a handout stands for is a function of h.placement and the container's units alone (see
// containerResponse, which must stay so); a group of containers may trade placements only when
// they are equal in everything else Allocate's answer is built from. The placements of a group of equal containers are a
// multiset that only gets permuted, so per-card totals stay; containers with an unchecked
// guess keep the env they were given when they can; the others keep what they have if they can.
func (p *Plugin) rebalance(ctx context.Context, handouts []handout, truths map[int]ownerRef, pods map[types.NamespacedName]*v1.Pod) error {
	slots := p.slots(pods)
	byRef := map[types.NamespacedName]map[string]*slot{}
	for _, s := range slots {
		if byRef[s.ref.pod] == nil {
			byRef[s.ref.pod] = map[string]*slot{}
		}
		byRef[s.ref.pod][s.ref.name] = s
	}
	fixed, soft := map[*slot]map[int]int64{}, map[*slot]map[int]int64{}
	owners := map[int]containerRef{}
	for i, h := range handouts {
		if truth, ok := truths[i]; ok {
			if s := byRef[truth.pod][truth.container]; s != nil && s.units == h.units {
				fixed[s], owners[i] = h.placement, s.ref
			}
		} else if s := byRef[h.owner.pod][h.owner.name]; s != nil && h.verified {
			fixed[s] = h.placement
		} else if s != nil {
			soft[s] = h.placement
		}
	}
	want, err := assign(slots, fixed, soft)
	if err != nil {
		return err
	}
	if err := p.writePlacements(ctx, slots, want, pods); err != nil {
		return err
	}
	for i, ref := range owners {
		h := handouts[i]
		if ref != h.owner {
			klog.FromContext(ctx).Info("Allocate had guessed the wrong pod; placement annotations corrected",
				"guessedPod", h.owner.pod, "pod", ref.pod, "container", ref.name)
		}
		p.tracker.confirm(h.devices, h.at, ref)
	}
	return nil
}

// assign computes each slot's placement: fixed ones first, then soft ones, then current
// values, then what is left; per group, the multiset of placements does not change.
func assign(slots []*slot, fixed, soft map[*slot]map[int]int64) (map[*slot]map[int]int64, error) {
	pools := map[slotGroup]map[string]int{}
	vals := map[string]map[int]int64{}
	for _, s := range slots {
		g := slotGroup{s.units, s.init}
		if pools[g] == nil {
			pools[g] = map[string]int{}
		}
		k := fmt.Sprint(s.ann)
		pools[g][k]++
		vals[k] = s.ann
	}
	want := map[*slot]map[int]int64{}
	take := func(s *slot, v map[int]int64) bool {
		pool := pools[slotGroup{s.units, s.init}]
		if k := fmt.Sprint(v); pool[k] > 0 {
			pool[k]--
			want[s] = v
			return true
		}
		return false
	}
	for _, s := range slots {
		if v, ok := fixed[s]; ok && !take(s, v) {
			return nil, fmt.Errorf("%w: %s/%s got %v, which no equal container holds", errUnbalanced, s.ref.pod, s.ref.name, v)
		}
	}
	for _, pass := range []func(*slot) (map[int]int64, bool){
		func(s *slot) (map[int]int64, bool) { v, ok := soft[s]; return v, ok },
		func(s *slot) (map[int]int64, bool) { return s.ann, true },
	} {
		for _, s := range slots {
			if v, ok := pass(s); want[s] == nil && ok {
				take(s, v)
			}
		}
	}
	for _, s := range slots {
		for k, n := range pools[slotGroup{s.units, s.init}] {
			if want[s] == nil && n > 0 {
				take(s, vals[k])
			}
		}
	}
	return want, nil
}

// slots lists the gpu-mem containers of the node's unassigned pods, in a stable order. A
// container whose placement does not match its ask (contract.CheckPlacement; a forged
// annotation) is left out, and so keeps its annotation: trading it would hand its placement,
// and the memory it claims, to a container that asked less, whose Allocate would then fail.
func (p *Plugin) slots(pods map[types.NamespacedName]*v1.Pod) []*slot {
	var out []*slot
	for nn, pod := range pods {
		if pod.Annotations[contract.AnnotationAssigned] == "true" || pod.DeletionTimestamp != nil {
			continue
		}
		req, err := contract.ParseRequest(pod, &p.cfg.names)
		if err != nil || req.Empty() {
			continue
		}
		alloc, ok, err := contract.AllocationFromPod(pod, &req)
		if err != nil || !ok {
			continue
		}
		for _, c := range req.Containers {
			if contract.CheckPlacement(c, alloc[c.Key]) != nil {
				continue // never trade a placement that does not match its ask onto another container
			}
			out = append(out, &slot{pod: pod, ref: containerRef{uid: pod.UID, pod: nn, key: c.Key, name: c.Name},
				units: c.Units, init: c.Init, ann: maps.Clone(alloc[c.Key])})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].ref, out[j].ref
		if a.pod != b.pod {
			return a.pod.String() < b.pod.String()
		}
		return a.key < b.key
	})
	return out
}

// writePlacements patches the pods whose slots changed and refreshes pods with the results.
func (p *Plugin) writePlacements(ctx context.Context, slots []*slot, want map[*slot]map[int]int64, pods map[types.NamespacedName]*v1.Pod) error {
	changed := map[types.NamespacedName]contract.Allocation{}
	for _, s := range slots {
		if maps.Equal(s.ann, want[s]) {
			continue
		}
		if changed[s.ref.pod] == nil {
			req, _ := contract.ParseRequest(s.pod, &p.cfg.names)
			alloc, _, _ := contract.AllocationFromPod(s.pod, &req)
			changed[s.ref.pod] = alloc.Clone()
		}
		changed[s.ref.pod][s.ref.key] = want[s]
	}
	for nn, alloc := range changed {
		patched, err := p.patchPlacement(ctx, pods[nn], alloc)
		if err != nil {
			return err
		}
		pods[nn] = patched
	}
	return nil
}
