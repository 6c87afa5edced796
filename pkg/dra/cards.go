package dra

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// ErrUnknownDevice is wrapped when an allocation names a device this node does not publish.
var ErrUnknownDevice = errors.New("unknown device")

// card is one GPU as the driver publishes it. Everything but its health is fixed at start.
type card struct {
	nvml.Device
	// name is the device's name in the pool, "gpu-<NVML index>".
	name string
	// capacity is the memory a claim can consume: the total less the driver's reserve and the
	// operator's (--reserve-memory), rounded down to whole units, as device-plugin mode counts
	// a card's units.
	capacity int64
	// standard are the standard attributes the node tells (PCIe root, PCI bus ID, NUMA node).
	standard []deviceattribute.DeviceAttribute
	// peers are the NVML indexes of the cards this one reaches by NVLink, ascending.
	peers []int
}

// sickness is why a card is out: the critical XID NVML reported and when.
type sickness struct {
	xid   uint64
	since time.Time
}

// cards are the node's GPUs, by NVML index, and their health.
type cards struct {
	list   []card // sorted by index; fixed
	byName map[string]int
	byUUID map[string]int
	mu     sync.RWMutex     // guards sick and changed
	sick   map[int]sickness // position in list → why it is out; absent when healthy
	// changed is closed and replaced on every health change.
	changed chan struct{}
}

// deviceName is the pool's name of the card with NVML index i (a DNS label).
func deviceName(i int) string { return "gpu-" + strconv.Itoa(i) }

// readCards reads every GPU from NVML, sizes it (cfg's unit and reserve) and reads where it
// sits: the standard attributes from NVML and sysfs, its NVLink peers from NVML. Neither
// placement can fail the driver: what is unknown is not published, and the log says so.
func readCards(logger klog.Logger, nv nvml.Interface, cfg *Config) (*cards, error) {
	n, err := nv.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("count GPUs: %w", err)
	}
	cs := &cards{byName: map[string]int{}, byUUID: map[string]int{}, sick: map[int]sickness{}, changed: make(chan struct{})}
	for i := range n {
		d, err := nv.Device(i)
		if err != nil {
			return nil, fmt.Errorf("read GPU %d: %w", i, err)
		}
		capacity, err := sizeCard(d, cfg.Names.UnitBytes(), cfg.ReserveMemory)
		if err != nil {
			return nil, err
		}
		c := card{Device: d, name: deviceName(d.Index), capacity: capacity, standard: standardAttributes(logger, d, cfg.SysfsRoot)}
		logger.Info("GPU sized", "gpu", d.Index, "uuid", d.UUID, "totalMiB", d.MemoryBytes>>20, "driverReservedMiB", d.ReservedBytes>>20,
			"driverReserveKnown", d.ReservedKnown, "reserveMemoryMiB", cfg.ReserveMemory>>20, "capacityMiB", capacity>>20)
		cs.list = append(cs.list, c)
	}
	sort.Slice(cs.list, func(a, b int) bool { return cs.list[a].Index < cs.list[b].Index })
	for pos, c := range cs.list {
		cs.byName[c.name] = pos
		cs.byUUID[c.UUID] = pos
	}
	cs.readPeers(logger, nv)
	return cs, nil
}

// sizeCard is what a claim can consume of card d: its total less the driver's reserve and
// reserve bytes of the operator's, in whole units of unit bytes. A card the reserves leave
// less than one unit of is an error: the operator's reserve (or unit) is wrong for it.
func sizeCard(d nvml.Device, unit, reserve int64) (int64, error) {
	units := d.UsableBytes(uint64(reserve)) / uint64(unit) //nolint:gosec // G115: Validate keeps the unit >= 1Mi and the reserve >= 0
	if units == 0 {
		return 0, fmt.Errorf("%w: GPU %d (%s): the driver's reserve (%d MiB) and --reserve-memory (%d MiB) leave less than one unit of %d MiB of its %d MiB",
			ErrInvalidConfig, d.Index, d.UUID, d.ReservedBytes>>20, reserve>>20, unit>>20, d.MemoryBytes>>20)
	}
	return int64(units) * unit, nil //nolint:gosec // G115: units is at most the card's bytes over a unit of >= 1Mi, far below MaxInt64
}

// standardAttributes are the standard attributes of d that the node can tell: its PCIe root
// (the folder of its root complex in sysfs) and PCI bus ID when NVML gave the bus ID, and its
// NUMA node from NVML, else from sysfs, as device-plugin mode reads it.
func standardAttributes(logger klog.Logger, d nvml.Device, sysfsRoot string) []deviceattribute.DeviceAttribute {
	var out []deviceattribute.DeviceAttribute
	fs := deviceattribute.WithFSFromRoot(sysfsRoot)
	if d.BusID == "" {
		logger.V(2).Info("PCI bus ID of the GPU unknown: no PCIe root or NUMA node published", "gpu", d.Index)
		return nil
	}
	if a, err := deviceattribute.GetPCIBusIDAttribute(d.BusID); err == nil {
		out = append(out, a)
	}
	if a, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(d.BusID, fs); err == nil {
		out = append(out, a)
	} else {
		logger.V(2).Info("PCIe root of the GPU unknown", "gpu", d.Index, "busID", d.BusID, "err", err)
	}
	var numa deviceattribute.DeviceAttribute
	var err error
	if d.NUMANode != nvml.NoNUMANode {
		numa, err = deviceattribute.GetNUMANodeAttribute(d.NUMANode, deviceattribute.ScalarAttribute)
	} else {
		numa, err = deviceattribute.GetNUMANodeAttributeByPCIBusID(d.BusID, deviceattribute.ScalarAttribute, fs)
	}
	if err != nil {
		logger.V(2).Info("NUMA node of the GPU unknown", "gpu", d.Index, "busID", d.BusID, "err", err)
		return out
	}
	return append(out, numa)
}

// readPeers reads which cards NVLink joins (directly or through NVSwitches), as the device
// plugin's link matrix does; when any card's links cannot be read, no card gets peers.
func (cs *cards) readPeers(logger klog.Logger, nv nvml.Interface) {
	devs := make([]nvml.Device, len(cs.list))
	for pos, c := range cs.list {
		devs[pos] = c.Device
	}
	links, err := nvml.ReadTopology(nv, devs)
	if err != nil {
		logger.Info("GPU topology unknown: the cards are published without NVLink peers", "err", err)
		return
	}
	for i := range cs.list {
		for j := range cs.list {
			if i != j && links[i][j].NVLinks() > 0 {
				cs.list[i].peers = append(cs.list[i].peers, cs.list[j].Index)
			}
		}
	}
}

// byDevice returns the card a device name in the pool stands for.
func (cs *cards) byDevice(name string) (card, error) {
	pos, ok := cs.byName[name]
	if !ok {
		return card{}, fmt.Errorf("%w %q: this node publishes %s", ErrUnknownDevice, name, cs.names())
	}
	return cs.list[pos], nil
}

// names lists the device names, for errors.
func (cs *cards) names() string {
	out := make([]string, len(cs.list))
	for i, c := range cs.list {
		out[i] = c.name
	}
	return strings.Join(out, ", ")
}

// uuids lists the cards' UUIDs by index.
func (cs *cards) uuids() []string {
	out := make([]string, len(cs.list))
	for i, c := range cs.list {
		out[i] = c.UUID
	}
	return out
}

// markSick takes the card with a UUID out for xid at now; it reports whether its health
// changed (an unknown UUID or a card already out changes nothing).
func (cs *cards) markSick(uuid string, xid uint64, now time.Time) bool {
	pos, ok := cs.byUUID[uuid]
	if !ok {
		return false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if _, out := cs.sick[pos]; out {
		return false
	}
	cs.sick[pos] = sickness{xid: xid, since: now}
	close(cs.changed)
	cs.changed = make(chan struct{})
	return true
}

// health returns why each card is out (by position) and a channel closed at the next change.
func (cs *cards) health() (map[int]sickness, <-chan struct{}) {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	out := make(map[int]sickness, len(cs.sick))
	for pos, s := range cs.sick {
		out[pos] = s
	}
	return out, cs.changed
}
