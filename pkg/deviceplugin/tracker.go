package deviceplugin

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
)

// handout is one answered Allocate: the env naming placement went to the container that
// kubelet gives devices. owner is the plugin's belief about that container, a guess until
// verified against the kubelet's PodResources.
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

// tracker remembers handouts until their pod is marked assigned.
type tracker struct {
	mu       sync.Mutex // guards handouts and refused; never held during I/O
	handouts []*handout
	// refused are the pods whose Allocate failed for want of a usable placement; they are
	// never candidates again (kubelet fails their admission).
	refused map[types.UID]bool
}

// refusedLocked returns the refused pods, creating the set. Caller holds t.mu.
func (t *tracker) refusedLocked() map[types.UID]bool {
	if t.refused == nil {
		t.refused = map[types.UID]bool{}
	}
	return t.refused
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

// devicesKey is the identity of a device set.
func devicesKey(ids []string) string {
	s := slices.Clone(ids)
	slices.Sort(s)
	return strings.Join(s, ",")
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

// addLocked records a handout. Caller holds t.mu.
func (t *tracker) addLocked(h *handout) { t.handouts = append(t.handouts, h) }

// nextContainerLocked is the container of pod that kubelet allocates next: the first gpu-mem
// container after the last one already allocated (by this plugin, or per the kubelet's own
// view kv, which survives plugin restarts but omits plain init containers). Kubelet allocates a
// pod's containers in order, init containers first. Caller holds t.mu.
func (t *tracker) nextContainerLocked(uid types.UID, nn types.NamespacedName, req *contract.PodRequest, kv *kubeletView) (contract.ContainerRequest, bool) {
	last := -1
	for i, c := range req.Containers {
		if t.hasLocked(uid, c.Key) || kv.hasDevices(nn, c.Name) {
			last = i
		}
	}
	if last+1 < len(req.Containers) {
		return req.Containers[last+1], true
	}
	return contract.ContainerRequest{}, false
}

// snapshot copies the handouts for the reconciler.
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

// update applies fn to the live handout with the given devices and time, if still there.
func (t *tracker) update(devices string, at time.Time, fn func(*handout)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.handouts {
		if h.devices == devices && h.at.Equal(at) {
			fn(h)
			return
		}
	}
}

// forget drops the handouts for which drop is true.
func (t *tracker) forget(drop func(*handout) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handouts = slices.DeleteFunc(t.handouts, drop)
}
