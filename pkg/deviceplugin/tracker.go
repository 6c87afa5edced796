package deviceplugin

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// handout is one answered Allocate: the env naming placement went to the container that
// kubelet gives devices. owner is the plugin's belief about that container, a guess until
// verified against the kubelet's PodResources.
//
// placement is exactly the placement Allocate's answer was built from (containerResponse); the
// background correction (verify.go, rebalance_placements.go) writes it onto the annotation of
// the container that really got devices, so the two must stay one and the same.
type handout struct {
	owner     containerRef
	units     int64
	devices   string // sorted, comma-joined device IDs: what identifies the handout in PodResources
	placement map[int]int64
	verified  bool
	at        time.Time
}

// containerRef names one gpu-mem container of a pod.
type containerRef struct {
	uid  types.UID
	pod  types.NamespacedName
	key  string // contract container key: "0", "init-0", ...
	name string
}

// tracker is the plugin's admission ledger: all that Allocate decides from besides the pods and
// the kubelet's view, and that the reconciler settles afterwards. It holds
//
//   - the handouts, Allocate's answers in the order given, until their pod is settled
//     (forgetSettled);
//   - the refused pods, whose Allocate failed for want of a usable placement or of capacity:
//     they are never candidates again (kubelet fails their admission), and are forgotten when
//     they leave the node;
//   - the parse cache of the pods' requests and placements.
//
// One mutex guards all three, and only tracker's own methods (in this file) take it; each does
// a whole operation under it. Methods named *Locked (here, in tracker_admit.go, parse_cache.go)
// run with it held. It is never held during I/O: the pods and the kubelet's view are read
// before admit is called, and the reconciler works on a snapshot.
//
// The zero value is an empty ledger, ready to use.
type tracker struct {
	mu       sync.Mutex // guards the fields below
	handouts []*handout
	refused  map[types.UID]bool
	parsed   parseCache
}

// admit answers one resolve pass: which container kubelet is allocating q.units devices for.
// With q.handOut it also records the answer, in the same critical section, so that two
// Allocates never get the same container: a handout of q.ids, or, when the pod cannot be
// admitted (no usable placement, or a card would go over capacity), the pod as refused.
func (t *tracker) admit(r admitRules, q admitQuery) admitAnswer {
	t.mu.Lock()
	defer t.mu.Unlock()
	ans := admitAnswer{candidates: t.pickLocked(r, q.pods, q.units, q.kv)}
	if ans.best == nil && q.kv != nil {
		if q.kv.awaitsUnseen(q.pods) {
			// The kubelet holds a pod without devices that the API server's pods do not show
			// yet: the pod being admitted, most likely. Wait for it; guessing among the pods
			// seen would hand this container another pod's card.
			ans.wait = true
			return ans
		}
		ans.candidates = t.pickLocked(r, q.pods, q.units, nil) // the kubelet may not list the pod it is admitting yet
	}
	switch found := ans.best; {
	case found == nil || !q.handOut:
	case found.broken != "":
		t.refuseLocked(found.pod.UID) // this Allocate was its: never pick it again
	default:
		if ans.over = t.overCapacityLocked(r, q.pods, q.kv, found); ans.over != "" {
			t.refuseLocked(found.pod.UID) // a scheduler bug: fail this pod, loudly
			break
		}
		t.handouts = append(t.handouts, &handout{owner: refOf(found), units: q.units, devices: devicesKey(q.ids),
			placement: maps.Clone(found.placement), at: time.Now()})
	}
	return ans
}

// snapshot copies the handouts for the reconciler, in the order given.
func (t *tracker) snapshot() []handout {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]handout, len(t.handouts))
	for i, h := range t.handouts {
		out[i] = *h
		out[i].placement = maps.Clone(h.placement)
	}
	return out
}

// confirm records that the handout of devices given at at went to owner (verified against the
// kubelet, or trusted), if it is still there.
func (t *tracker) confirm(devices string, at time.Time, owner containerRef) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.handouts {
		if h.devices == devices && h.at.Equal(at) {
			h.owner, h.verified = owner, true
			return
		}
	}
}

// retract drops the handouts of devices to owner: Allocate recorded them but could not answer.
func (t *tracker) retract(devices string, owner containerRef) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handouts = slices.DeleteFunc(t.handouts, func(h *handout) bool { return h.devices == devices && h.owner == owner })
}

// forgetSettled drops the handouts of pods not in live (assigned or gone) that are verified, or
// older than ttl (never to be verified).
func (t *tracker) forgetSettled(live map[types.UID]bool, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handouts = slices.DeleteFunc(t.handouts, func(h *handout) bool {
		return !live[h.owner.uid] && (h.verified || time.Since(h.at) > ttl)
	})
}

// refuseLocked marks a pod refused. Caller holds t.mu.
func (t *tracker) refuseLocked(uid types.UID) {
	if t.refused == nil {
		t.refused = map[types.UID]bool{}
	}
	t.refused[uid] = true
}

// pruneRefusedLocked forgets refused pods that are no longer among pods. Caller holds t.mu.
func (t *tracker) pruneRefusedLocked(pods []*v1.Pod) {
	if len(t.refused) == 0 {
		return
	}
	live := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		live[p.UID] = true
	}
	for uid := range t.refused {
		if !live[uid] {
			delete(t.refused, uid)
		}
	}
}

// hasLocked reports whether the plugin answered Allocate for a container. Caller holds t.mu.
func (t *tracker) hasLocked(uid types.UID, key string) bool {
	for _, h := range t.handouts {
		if h.owner.uid == uid && h.owner.key == key {
			return true
		}
	}
	return false
}

// devicesKey is the identity of a device set.
// ownerOf is the container the latest handout of devices (sorted, joined IDs) was given to.
func (t *tracker) ownerOf(devices string) (ownerRef, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.handouts) - 1; i >= 0; i-- {
		if h := t.handouts[i]; h.devices == devices {
			return ownerRef{pod: h.owner.pod, container: h.owner.name}, true
		}
	}
	return ownerRef{}, false
}

func devicesKey(ids []string) string {
	s := slices.Clone(ids)
	slices.Sort(s)
	return strings.Join(s, ",")
}
