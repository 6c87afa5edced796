package dra

import (
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Attributes of a device, in the driver's domain (a DeviceClass or claim selector reads them as
// device.attributes["<driver>"].<name>). The standard ones (resource.kubernetes.io/pcieRoot,
// pciBusID, numaNode) come from k8s.io/dynamic-resource-allocation/deviceattribute.
const (
	// AttrUUID is the card's NVML UUID (string).
	AttrUUID resourceapi.QualifiedName = "uuid"
	// AttrModel is the card's product name (string), e.g. "NVIDIA A100-SXM4-40GB".
	AttrModel resourceapi.QualifiedName = "model"
	// AttrIndex is the card's NVML index (int), the contract's GPU index.
	AttrIndex resourceapi.QualifiedName = "index"
	// AttrNVLinkPeers lists the NVML indexes of the cards NVLink joins this one to,
	// comma-separated and ascending (string, e.g. "1,2,3"); absent without NVLink. A list
	// attribute would need the alpha gate DRAListTypeAttributes.
	AttrNVLinkPeers resourceapi.QualifiedName = "nvlinkPeers"
)

// Consumable capacities of a device.
const (
	// CapacityMemory is the card's memory in bytes; a claim consumes a multiple of the unit, and
	// the whole card when it asks none.
	CapacityMemory resourceapi.QualifiedName = "memory"
	// CapacityCores is the card's SMs in percent (0-100); a claim consumes its compute cap, and
	// none (no cap) when it asks none. The caps of a card's claims add up to at most 100.
	CapacityCores resourceapi.QualifiedName = "cores"
)

// TaintUnhealthy is the key, under the driver's domain, of the NoSchedule taint of a card a
// critical XID took out ("<driver>/unhealthy"); its value is "xid-<n>".
const TaintUnhealthy = "unhealthy"

// publication is what the driver publishes: its cards, their health, and the memory its
// prepared claims consumed on each (by NVML index), in an order.
type publication struct {
	driver    string
	pool      string
	unit      int64
	cards     []card
	sick      map[int]sickness // by position in cards
	allocated map[int]int64
	order     DeviceOrder
}

// resources is the node's one pool with one slice of one device per card, in the order.
func (p *publication) resources() resourceslice.DriverResources {
	uses := make([]CardUse, len(p.cards))
	pos := make(map[int]int, len(p.cards))
	for i, c := range p.cards {
		uses[i] = CardUse{Index: c.Index, CapacityBytes: c.capacity, AllocatedBytes: p.allocated[c.Index]}
		pos[c.Index] = i
	}
	p.order(uses)
	devices := make([]resourceapi.Device, 0, len(uses))
	for _, u := range uses {
		i := pos[u.Index]
		var why *sickness
		if s, out := p.sick[i]; out {
			why = &s
		}
		devices = append(devices, p.device(p.cards[i], why))
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		p.pool: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
}

// device is one card's device: attributes, consumable memory and cores, shared by any number
// of claims, and a NoSchedule taint when why says it is out.
func (p *publication) device(c card, why *sickness) resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		AttrUUID:  {StringValue: ptr.To(c.UUID)},
		AttrModel: {StringValue: ptr.To(truncate(c.Model, resourceapi.DeviceAttributeMaxValueLength))},
		AttrIndex: {IntValue: ptr.To(int64(c.Index))},
	}
	if peers := joinInts(c.peers); peers != "" && len(peers) <= resourceapi.DeviceAttributeMaxValueLength {
		attrs[AttrNVLinkPeers] = resourceapi.DeviceAttribute{StringValue: ptr.To(peers)}
	}
	for _, a := range c.standard {
		attrs[a.Name] = a.Value
	}
	d := resourceapi.Device{
		Name:       c.name,
		Attributes: attrs,
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			CapacityMemory: memoryCapacity(c.capacity, p.unit),
			CapacityCores:  coresCapacity(),
		},
		AllowMultipleAllocations: ptr.To(true),
	}
	if why != nil {
		d.Taints = []resourceapi.DeviceTaint{{Key: p.driver + "/" + TaintUnhealthy, Value: "xid-" + strconv.FormatUint(why.xid, 10),
			Effect: resourceapi.DeviceTaintEffectNoSchedule, TimeAdded: ptr.To(metav1.NewTime(why.since))}}
	}
	return d
}

// memoryCapacity is a card's memory of capacity bytes (a whole number of units): requests are
// rounded up to a multiple of the unit, from one unit to the whole card, which is also what a
// request that names no memory consumes. The API wants min + step within the capacity, so a
// card of one unit gets no step (its one valid value is the unit).
func memoryCapacity(capacity, unit int64) resourceapi.DeviceCapacity {
	r := &resourceapi.CapacityRequestPolicyRange{Min: quantityBytes(unit), Max: quantityBytes(capacity)}
	if capacity >= 2*unit {
		r.Step = quantityBytes(unit)
	}
	return resourceapi.DeviceCapacity{Value: *quantityBytes(capacity),
		RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: quantityBytes(capacity), ValidRange: r}}
}

// coresCapacity is a card's SMs in percent: requests of 0 to 100 in steps of 1, 0 by default.
func coresCapacity() resourceapi.DeviceCapacity {
	return resourceapi.DeviceCapacity{Value: *percent(contract.MaxCorePercent),
		RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: percent(0),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: percent(0), Max: percent(contract.MaxCorePercent), Step: percent(1)}}}
}

// quantityBytes is a binary quantity of n bytes.
func quantityBytes(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.BinarySI) }

// percent is a decimal quantity of n.
func percent(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

// joinInts writes ns comma-separated.
func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
