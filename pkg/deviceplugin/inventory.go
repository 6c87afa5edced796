package deviceplugin

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// ErrUnknownDevice is returned for a device ID the plugin did not advertise.
var ErrUnknownDevice = errors.New("unknown device ID")

// deviceIDSep separates the GPU UUID from the unit number in a fake device ID: "<UUID>::<n>".
const deviceIDSep = "::"

// gpu is one card with its usable memory in units and its health.
type gpu struct {
	nvml.Device
	// reserved is what no container can get: the driver's reserve plus the operator's
	// (WithReserveMemory); usable is the rest, which units count.
	reserved, usable uint64
	units            int64
	healthy          bool
}

// inventory is the node's GPUs. The card list, their NUMA nodes and links are fixed at start;
// health changes.
type inventory struct {
	mu      sync.RWMutex // guards healthy of every gpu and changed
	gpus    []gpu        // sorted by index
	byUUID  map[string]int
	byIndex map[int]int
	changed chan struct{} // closed and replaced on every health change
	// links is the link matrix by position in gpus (readTopology); nil when unknown.
	links [][]contract.Link
}

// newInventory reads every GPU from NVML and sizes it in units of names: what a container can
// get of it, its total less the driver's reserve and the operator's (reserve bytes per card).
func newInventory(nv nvml.Interface, names *contract.Names, reserve uint64) (*inventory, error) {
	n, err := nv.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("count GPUs: %w", err)
	}
	inv := &inventory{byUUID: map[string]int{}, byIndex: map[int]int{}, changed: make(chan struct{})}
	for i := range n {
		d, err := nv.Device(i)
		if err != nil {
			return nil, fmt.Errorf("read GPU %d: %w", i, err)
		}
		g, err := sizeGPU(d, names, reserve)
		if err != nil {
			return nil, err
		}
		inv.gpus = append(inv.gpus, g)
	}
	sort.Slice(inv.gpus, func(a, b int) bool { return inv.gpus[a].Index < inv.gpus[b].Index })
	for pos, g := range inv.gpus {
		inv.byUUID[g.UUID] = pos
		inv.byIndex[g.Index] = pos
	}
	return inv, nil
}

// deviceID names unit n of a GPU.
func deviceID(uuid string, n int64) string { return uuid + deviceIDSep + strconv.FormatInt(n, 10) }

// gpuOf returns the index of the GPU a device ID belongs to; an ID the plugin never advertised
// is an error.
func (inv *inventory) gpuOf(id string) (int, error) {
	cut := strings.LastIndex(id, deviceIDSep)
	if cut < 0 {
		return 0, fmt.Errorf("%w %q", ErrUnknownDevice, id)
	}
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	pos, ok := inv.byUUID[id[:cut]]
	if !ok {
		return 0, fmt.Errorf("%w %q: no GPU %s on this node", ErrUnknownDevice, id, id[:cut])
	}
	// Only the IDs devices advertises: units 0..units-1, written as deviceID writes them.
	n, err := strconv.ParseInt(id[cut+len(deviceIDSep):], 10, 64)
	if err != nil || n < 0 || n >= inv.gpus[pos].units || deviceID(id[:cut], n) != id {
		return 0, fmt.Errorf("%w %q: GPU %s has units 0 to %d", ErrUnknownDevice, id, id[:cut], inv.gpus[pos].units-1)
	}
	return inv.gpus[pos].Index, nil
}

// lookup returns the GPU with an NVML index.
func (inv *inventory) lookup(index int) (gpu, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	pos, ok := inv.byIndex[index]
	if !ok {
		return gpu{}, false
	}
	return inv.gpus[pos], true
}

// lookupUUID returns the GPU with a UUID.
func (inv *inventory) lookupUUID(uuid string) (gpu, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	pos, ok := inv.byUUID[uuid]
	if !ok {
		return gpu{}, false
	}
	return inv.gpus[pos], true
}

// devices lists the fake devices, one per unit, and a channel closed at the next change.
func (inv *inventory) devices() ([]*pluginapi.Device, <-chan struct{}) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	var out []*pluginapi.Device
	for _, g := range inv.gpus {
		health := pluginapi.Healthy
		if !g.healthy {
			health = pluginapi.Unhealthy
		}
		var topo *pluginapi.TopologyInfo
		if g.NUMANode != nvml.NoNUMANode {
			topo = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(g.NUMANode)}}}
		}
		for n := range g.units {
			out = append(out, &pluginapi.Device{ID: deviceID(g.UUID, n), Health: health, Topology: topo})
		}
	}
	return out, inv.changed
}

// setHealthy records a GPU's health; it reports whether anything changed.
func (inv *inventory) setHealthy(uuid string, healthy bool) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	pos, ok := inv.byUUID[uuid]
	if !ok || inv.gpus[pos].healthy == healthy {
		return false
	}
	inv.gpus[pos].healthy = healthy
	close(inv.changed)
	inv.changed = make(chan struct{})
	return true
}

// uuids lists the GPUs' UUIDs by index.
func (inv *inventory) uuids() []string {
	out := make([]string, len(inv.gpus))
	for i, g := range inv.gpus {
		out[i] = g.UUID
	}
	return out
}

// contractGPUs renders the inventory as the node annotation's entries; memoryLimit is the
// plugin's effective memory limit mode.
func (inv *inventory) contractGPUs(memoryLimit string) []contract.GPU {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	out := make([]contract.GPU, 0, len(inv.gpus))
	for pos, g := range inv.gpus {
		c := contract.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, Units: g.units, Healthy: g.healthy,
			MemoryLimit: memoryLimit, MemoryBytes: bytesOf(g.MemoryBytes), ReservedBytes: bytesOf(g.reserved),
			UsableBytes: bytesOf(g.usable)}
		if g.NUMANode != nvml.NoNUMANode {
			c.NUMA = &g.NUMANode
		}
		c.Links, c.TopologyVersion = inv.linksRow(pos)
		out = append(out, c)
	}
	return out
}
