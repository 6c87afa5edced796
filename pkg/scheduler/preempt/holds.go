package preempt

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/gpushare/gpushare/pkg/placement"
)

// A hold keeps the memory a preemption frees for the pod that preempted: while the victims
// terminate, and until the preemptor is bound, deleted, or the hold runs out, every other pod
// sees the held units as used on that card. The preemptor itself sees the card as it is,
// victims included: it fits there only once they are gone, so it is never started beside
// processes that still hold the memory. A hold is written on the preemptor as an annotation
// (Names.PreemptionAnnotation) before any victim is evicted, so that a restarted extender or a
// new leader rebuilds it from the API (Preemptor.RebuildHolds); it is signed (hold_mac.go), and
// a hold that does not verify is ignored. The bind of the preemptor removes it
// (Preemptor.EndHold).

// HoldRecord is the preemption annotation's value.
type HoldRecord struct {
	// Node and GPU (NVML index) name the card; Units is what the preemptor needs there.
	Node  string `json:"node"`
	GPU   int    `json:"gpu"`
	Units int64  `json:"units"`
	// Until is when the hold ends whatever happened (RFC 3339).
	Until time.Time `json:"until"`
	// Victims are the evicted pods, namespace/name (for users; the hold does not need them).
	Victims []string `json:"victims,omitempty"`
	// MAC is the extender's signature of the record and the pod's UID (hold_mac.go).
	MAC string `json:"mac,omitempty"`
}

// hold is a HoldRecord of a pod.
type hold struct {
	HoldRecord
	pod       types.UID
	namespace string
	name      string
	// victims are the UIDs of the pods evicted for it, when this replica evicted them: their
	// memory is leaving the card, for the preemptions planned after this one.
	victims []types.UID
}

// Holds is the holds in force, by node. Safe for concurrent use; empty costs one atomic load.
type Holds struct {
	count atomic.Int32
	mu    sync.RWMutex // guards byNode and ignored
	// byNode is the holds by node name.
	byNode map[string][]hold
	// ignored is the pods whose hold annotation did not verify at the last rebuild.
	ignored map[types.UID]struct{}
	now     func() time.Time
}

func newHolds(now func() time.Time) *Holds {
	return &Holds{byNode: map[string][]hold{}, now: now}
}

// Empty reports whether no hold is in force (one atomic load).
func (s *Holds) Empty() bool { return s.count.Load() == 0 }

// add puts h in force, replacing the pod's earlier hold.
func (s *Holds) add(h hold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(h.pod)
	s.byNode[h.Node] = append(s.byNode[h.Node], h)
	s.count.Add(1)
}

// remove ends the pod's hold, if any; it reports whether there was one.
func (s *Holds) remove(uid types.UID) bool {
	if s.Empty() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(uid)
}

// removeLocked is remove; the caller holds s.mu.
func (s *Holds) removeLocked(uid types.UID) bool {
	for node, hs := range s.byNode {
		i := slices.IndexFunc(hs, func(h hold) bool { return h.pod == uid })
		if i < 0 {
			continue
		}
		hs = slices.Delete(hs, i, i+1)
		if len(hs) == 0 {
			delete(s.byNode, node)
		} else {
			s.byNode[node] = hs
		}
		s.count.Add(-1)
		return true
	}
	return false
}

// Of returns the pod's hold in force, if any.
func (s *Holds) Of(uid types.UID) (HoldRecord, bool) {
	h, ok := s.of(uid)
	return h.HoldRecord, ok
}

// of is Of with the hold's pod.
func (s *Holds) of(uid types.UID) (hold, bool) {
	if s.Empty() {
		return hold{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now := s.now()
	for _, hs := range s.byNode {
		for _, h := range hs {
			if h.pod == uid && now.Before(h.Until) {
				return h, true
			}
		}
	}
	return hold{}, false
}

// leaving is the pods evicted for the holds in force: their memory is leaving their cards.
func (s *Holds) leaving() map[types.UID]bool {
	if s.Empty() {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now := s.now()
	out := map[types.UID]bool{}
	for _, hs := range s.byNode {
		for _, h := range hs {
			for _, v := range h.victims {
				if now.Before(h.Until) {
					out[v] = true
				}
			}
		}
	}
	return out
}

// all lists the holds (tests).
func (s *Holds) all() []hold {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []hold
	for _, hs := range s.byNode {
		out = append(out, hs...)
	}
	return out
}

// View is node as pod sees it: the units other pods' holds keep on its cards count as used,
// except those of a holder the node already charges (assumed or bound there: its own
// allocation counts, and its hold ends when its bind returns). node itself when no other pod
// holds memory there (the usual case: no copy, no lock).
func (s *Holds) View(node *placement.NodeInfo, pod types.UID) *placement.NodeInfo {
	if node == nil || s.Empty() {
		return node
	}
	s.mu.RLock()
	hs := s.byNode[node.Name]
	var extra map[int]int64
	now := s.now()
	for _, h := range hs {
		if h.pod == pod || !now.Before(h.Until) || Charged(node, h.pod) {
			continue
		}
		if extra == nil {
			extra = map[int]int64{}
		}
		extra[h.GPU] += h.Units
	}
	s.mu.RUnlock()
	if extra == nil {
		return node
	}
	cp := *node
	cp.SetGPUs(node.GPUs)
	for i := range cp.GPUs {
		cp.GPUs[i].Used += extra[cp.GPUs[i].Index]
	}
	cp.Summarize()
	return &cp
}

// Charged reports whether node charges the pod of uid: it holds gpu-mem there.
func Charged(node *placement.NodeInfo, uid types.UID) bool {
	if node == nil {
		return false
	}
	for i := range node.Pods {
		if node.Pods[i].UID == uid {
			return true
		}
	}
	return false
}

// expire drops the holds that ran out, and those whose pod is gone or bound according to
// pods (nil: time only). It returns the holds dropped.
func (s *Holds) expire(pods corelisters.PodLister) []hold {
	if s.Empty() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var dropped []hold
	for node, hs := range s.byNode {
		kept := hs[:0]
		for _, h := range hs {
			if now.Before(h.Until) && (pods == nil || holdStillWanted(pods, h)) {
				kept = append(kept, h)
				continue
			}
			dropped = append(dropped, h)
			s.count.Add(-1)
		}
		if len(kept) == 0 {
			delete(s.byNode, node)
		} else {
			s.byNode[node] = kept
		}
	}
	return dropped
}

// holdStillWanted: the pod is there, the same one, and not yet bound.
func holdStillWanted(pods corelisters.PodLister, h hold) bool {
	p, err := pods.Pods(h.namespace).Get(h.name)
	return err == nil && p.UID == h.pod && p.Spec.NodeName == "" && p.DeletionTimestamp == nil
}

// rebuild replaces the holds by those the API's pods carry in annotation: pending pods, not
// being deleted, whose hold verifies under macKey, has not run out and asks at most the units
// the pod asks (asks). It returns the pods whose hold did not verify and that the rebuild before
// did not report already.
func (s *Holds) rebuild(pods corelisters.PodLister, annotation string, macKey []byte, asks func(*v1.Pod) int64) ([]*v1.Pod, error) {
	list, err := pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("rebuild preemption holds: %w", err)
	}
	byNode := map[string][]hold{}
	ignored := map[types.UID]struct{}{}
	var fresh []*v1.Pod
	n := int32(0)
	now := s.now()
	s.mu.RLock()
	before := s.ignored
	s.mu.RUnlock()
	for _, p := range list {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		h, found, valid := holdOf(p, annotation, macKey)
		if found && !valid {
			ignored[p.UID] = struct{}{}
			if _, seen := before[p.UID]; !seen {
				fresh = append(fresh, p)
			}
		}
		if !valid || !now.Before(h.Until) || asks(p) < h.Units {
			continue
		}
		h.Until = minTime(h.Until, now.Add(MaxHold)) // whoever wrote it, a hold ends within MaxHold
		byNode[h.Node] = append(byNode[h.Node], h)
		n++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byNode, s.ignored = byNode, ignored
	s.count.Store(n)
	return fresh, nil
}

// holdOf reads pod's hold annotation: found when the pod carries one, valid when it is well
// formed and its MAC verifies under macKey.
func holdOf(pod *v1.Pod, annotation string, macKey []byte) (h hold, found, valid bool) {
	raw, ok := pod.Annotations[annotation]
	if !ok {
		return hold{}, false, false
	}
	var rec HoldRecord
	if len(raw) > maxHoldAnnotation || json.Unmarshal([]byte(raw), &rec) != nil || rec.Node == "" || rec.Units <= 0 ||
		!verifyHold(macKey, pod.UID, &rec) {
		return hold{}, true, false
	}
	return hold{HoldRecord: rec, pod: pod.UID, namespace: pod.Namespace, name: pod.Name}, true, true
}

// maxHoldAnnotation bounds the hold annotation a pod may carry (its victims' names included).
const maxHoldAnnotation = 16 << 10

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
