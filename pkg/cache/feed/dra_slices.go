package feed

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// The names the DRA driver (pkg/dra) publishes under: its device attributes and capacities,
// and the name of the device of the card of NVML index i, "gpu-<i>".
const (
	draAttrUUID       = "uuid"
	draAttrModel      = "model"
	draAttrIndex      = "index"
	draCapacityMemory = "memory"
	draDevicePrefix   = "gpu-"
)

// DRAFeed keeps a cache.Cache's DRA nodes equal to the API server's ResourceSlices and
// ResourceClaims (the extender's DRA mode): each node's cards from the slices of the driver's
// pool of that node, and what each pod holds on them from its allocated claims. It reads no
// gpu-mem annotation and writes nothing. Its handlers are called by the informers, one event at
// a time per informer; it hands the cache what changed under its own lock, which orders the
// slice and claim events (the cache does no I/O, so no I/O happens under that lock either).
type DRAFeed struct {
	cache  cache.Cache
	driver string
	unit   int64 // bytes per unit
	logger klog.Logger

	// mu guards slices and charged.
	mu sync.Mutex
	// slices are the driver's slices by node, then by slice name.
	slices map[string]map[string]*resourceapi.ResourceSlice
	// charged records which claims the cache charges, so that a claim no longer allocated
	// is released once.
	charged map[types.UID]bool
}

// NewDRAFeed returns a feed of c with the devices of driver, whose memory capacity counts in
// names.Unit.
func NewDRAFeed(c cache.Cache, driver string, names contract.Names, logger klog.Logger) *DRAFeed {
	unit := names.Unit.Value()
	if unit <= 0 {
		unit = 1
	}
	return &DRAFeed{cache: c, driver: driver, unit: unit, logger: logger,
		slices: map[string]map[string]*resourceapi.ResourceSlice{}, charged: map[types.UID]bool{}}
}

// sliceNode is the node of one of the driver's slices (see DRASliceNode).
func (f *DRAFeed) sliceNode(s *resourceapi.ResourceSlice) string { return DRASliceNode(s, f.driver) }

// DRASliceNode is the node whose cards slice s publishes for driver: its nodeName, else its
// pool's name (the driver names its pool after the node); "" for a slice of another driver.
// It is how DRAFeed files a slice, for callers that pick slices by node before feeding them.
func DRASliceNode(s *resourceapi.ResourceSlice, driver string) string {
	if s.Spec.Driver != driver {
		return ""
	}
	if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
		return *s.Spec.NodeName
	}
	return s.Spec.Pool.Name
}

// SetSlice records an added or changed slice and hands its node's cards to the cache.
func (f *DRAFeed) SetSlice(s *resourceapi.ResourceSlice) {
	node := f.sliceNode(s)
	if node == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.slices[node] == nil {
		f.slices[node] = map[string]*resourceapi.ResourceSlice{}
	}
	f.slices[node][s.Name] = s
	f.cache.SetDRACards(node, f.cardsLocked(node))
}

// RemoveSlice forgets a deleted slice; a node left without slices goes back to what its Node
// object says.
func (f *DRAFeed) RemoveSlice(s *resourceapi.ResourceSlice) {
	node := f.sliceNode(s)
	if node == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.slices[node], s.Name)
	if len(f.slices[node]) == 0 {
		delete(f.slices, node)
		f.cache.RemoveDRACards(node)
		return
	}
	f.cache.SetDRACards(node, f.cardsLocked(node))
}

// cardsLocked lists a node's cards in the order the allocator walks them: the slices of the
// pool's newest generation by name, each slice's devices as published. Caller holds f.mu.
func (f *DRAFeed) cardsLocked(node string) []placement.GPUInfo {
	var gen int64
	names := make([]string, 0, len(f.slices[node]))
	for name, s := range f.slices[node] {
		gen = max(gen, s.Spec.Pool.Generation)
		names = append(names, name)
	}
	slices.Sort(names)
	var out []placement.GPUInfo
	for _, name := range names {
		s := f.slices[node][name]
		if s.Spec.Pool.Generation != gen {
			continue // an older generation, about to be replaced: the allocator ignores it
		}
		for i := range s.Spec.Devices {
			out = append(out, f.card(&s.Spec.Devices[i]))
		}
	}
	return out
}

// card is one published device as a card: its attributes, its memory in whole units, and
// healthy unless a NoSchedule or NoExecute taint keeps new claims off it.
func (f *DRAFeed) card(d *resourceapi.Device) placement.GPUInfo {
	g := placement.GPUInfo{Index: -1, Healthy: true}
	if i, ok := deviceIndex(d.Name); ok {
		g.Index = i
	}
	if a, ok := f.attribute(d, draAttrIndex); ok && a.IntValue != nil {
		g.Index = int(*a.IntValue)
	}
	if a, ok := f.attribute(d, draAttrUUID); ok && a.StringValue != nil {
		g.UUID = *a.StringValue
	}
	if a, ok := f.attribute(d, draAttrModel); ok && a.StringValue != nil {
		g.Model = *a.StringValue
	}
	if c, ok := d.Capacity[draCapacityMemory]; ok {
		g.Capacity = c.Value.Value() / f.unit
	}
	for _, t := range d.Taints {
		if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			g.Healthy = false
		}
	}
	return g
}

// attribute reads a device attribute by its name in the driver's domain, written bare or
// qualified.
func (f *DRAFeed) attribute(d *resourceapi.Device, name string) (resourceapi.DeviceAttribute, bool) {
	if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok {
		return a, true
	}
	a, ok := d.Attributes[resourceapi.QualifiedName(f.driver+"/"+name)]
	return a, ok
}

// deviceIndex is the NVML index in a device name "gpu-<index>".
func deviceIndex(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, draDevicePrefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0
}

// deviceLocked finds a published device of node by name; ok is false when the feed has not
// seen it. Caller holds f.mu.
func (f *DRAFeed) deviceLocked(node, name string) (placement.GPUInfo, bool) {
	for _, s := range f.slices[node] {
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == name {
				return f.card(&s.Spec.Devices[i]), true
			}
		}
	}
	return placement.GPUInfo{}, false
}
