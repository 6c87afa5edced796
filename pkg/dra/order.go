package dra

import (
	"cmp"
	"maps"
	"slices"
)

// Device orders (--dra-device-order). kube-scheduler's allocator tries a pool's devices in the
// order the driver published them and takes the first that fits (first-fit), so the order
// chooses the card on a node; docs/placement.md ("Under DRA") prices each.
const (
	// OrderIndex publishes the cards by NVML index: the allocator fills card 0 first.
	OrderIndex = "index"
	// OrderMostAllocated publishes the card with the least memory left (the most allocated)
	// first, ties by index, republished on every prepare and unprepare: first-fit in it is
	// best-fit, which packs claims onto cards already in use and leaves empty cards whole. It
	// is the simulator's "tightest" order (pkg/sim, CardOrderTightest).
	OrderMostAllocated = "most-allocated"
)

// CardUse is one card as an order sees it.
type CardUse struct {
	// Index is the card's NVML index.
	Index int
	// CapacityBytes is the memory claims can consume of it.
	CapacityBytes int64
	// AllocatedBytes is the memory the claims prepared on it consumed.
	AllocatedBytes int64
}

// DeviceOrder sorts cards, in place, into the order their devices are published in. It must be
// deterministic: the same cards give the same order, so that republishing changes nothing.
type DeviceOrder func(cards []CardUse)

// orders are the device orders by name.
func orders() map[string]DeviceOrder {
	return map[string]DeviceOrder{OrderIndex: ByIndex, OrderMostAllocated: MostAllocatedFirst}
}

// OrderNames lists the names Config.DeviceOrder accepts.
func OrderNames() []string { return slices.Sorted(maps.Keys(orders())) }

// ByIndex is OrderIndex: by NVML index.
func ByIndex(cards []CardUse) {
	slices.SortFunc(cards, func(a, b CardUse) int { return cmp.Compare(a.Index, b.Index) })
}

// MostAllocatedFirst is OrderMostAllocated: least memory left first, ties by index. On cards
// of one size that is the most memory allocated first.
func MostAllocatedFirst(cards []CardUse) {
	slices.SortFunc(cards, func(a, b CardUse) int {
		return cmp.Or(cmp.Compare(a.CapacityBytes-a.AllocatedBytes, b.CapacityBytes-b.AllocatedBytes), cmp.Compare(a.Index, b.Index))
	})
}
