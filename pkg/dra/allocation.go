package dra

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
)

// ErrBadAllocation is wrapped when a claim's allocation cannot be prepared on this node: it
// names no device of the driver, another node's pool, a device the node does not publish, or
// no consumed memory.
var ErrBadAllocation = errors.New("allocation cannot be prepared")

// share is what one claim holds of one card.
type share struct {
	// Index and UUID name the card; Device is its device name in the pool.
	Index  int    `json:"index"`
	UUID   string `json:"uuid"`
	Device string `json:"device"`
	// Bytes is the memory the claim consumed of it; Cores its compute cap there, in percent
	// (0: none).
	Bytes int64 `json:"bytes"`
	Cores int64 `json:"cores"`
	// CardBytes is the card's capacity (for ALIYUN_COM_GPU_MEM_DEV).
	CardBytes int64 `json:"cardBytes"`
}

// consumer is a pod a claim is reserved for.
type consumer struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// ask is one claim's allocation on this node, resolved to the node's cards.
type ask struct {
	// shares are the claim's cards, by ascending index (NVIDIA_VISIBLE_DEVICES order).
	shares []share
	// results are the claim's allocation results of this driver, as allocated.
	results []resourceapi.DeviceRequestAllocationResult
	// pods are the pods the claim is reserved for (claim.status.reservedFor).
	pods []consumer
}

// resolve reads claim's allocation for this driver: each device and what it consumed, merged
// per card (a claim may get two shares of one card through two requests), and the pods the
// claim is reserved for. Anything it cannot hold the claim to is an error wrapping
// ErrBadAllocation or ErrUnknownDevice.
func (d *Driver) resolve(claim *resourceapi.ResourceClaim) (ask, error) {
	if claim.Status.Allocation == nil {
		return ask{}, fmt.Errorf("%w: claim %s is not allocated", ErrBadAllocation, klog.KObj(claim))
	}
	var a ask
	perCard := map[int]*share{}
	var others []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.cfg.DriverName {
			others = append(others, r.Driver+"/"+r.Pool+"/"+r.Device)
			continue
		}
		s, err := d.shareOf(claim, r)
		if err != nil {
			return ask{}, err
		}
		a.results = append(a.results, r)
		if prev, ok := perCard[s.Index]; ok {
			prev.Bytes += s.Bytes
			prev.Cores += s.Cores
			continue
		}
		perCard[s.Index] = &s
	}
	if len(a.results) == 0 {
		return ask{}, fmt.Errorf("%w: claim %s has no device of driver %s (it has %s)", ErrBadAllocation, klog.KObj(claim),
			d.cfg.DriverName, strings.Join(others, ", "))
	}
	for _, s := range perCard {
		a.shares = append(a.shares, *s)
	}
	slices.SortFunc(a.shares, func(x, y share) int { return x.Index - y.Index })
	if err := checkShares(claim, a.shares); err != nil {
		return ask{}, err
	}
	a.pods = podsOf(claim)
	if len(a.pods) == 0 {
		return ask{}, fmt.Errorf("%w: claim %s is reserved for no pod", ErrBadAllocation, klog.KObj(claim))
	}
	return a, nil
}

// shareOf resolves one allocation result of the driver: the card and what it consumed.
func (d *Driver) shareOf(claim *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult) (share, error) {
	where := fmt.Sprintf("claim %s device %s/%s/%s", klog.KObj(claim), r.Driver, r.Pool, r.Device)
	if r.Pool != d.cfg.NodeName {
		return share{}, fmt.Errorf("%w: %s: pool %q is not this node's (%q)", ErrBadAllocation, where, r.Pool, d.cfg.NodeName)
	}
	if r.AdminAccess != nil && *r.AdminAccess {
		return share{}, fmt.Errorf("%w: %s: admin access is not supported", ErrBadAllocation, where)
	}
	c, err := d.cards.byDevice(r.Device)
	if err != nil {
		return share{}, fmt.Errorf("%s: %w", where, err)
	}
	mem, ok := r.ConsumedCapacity[CapacityMemory]
	if !ok {
		return share{}, fmt.Errorf("%w: %s: no consumed %s capacity (kube-scheduler must run with the DRAConsumableCapacity feature gate, on by default since 1.36)",
			ErrBadAllocation, where, CapacityMemory)
	}
	s := share{Index: c.Index, UUID: c.UUID, Device: c.name, Bytes: mem.Value(), CardBytes: c.capacity}
	if cores, ok := r.ConsumedCapacity[CapacityCores]; ok {
		s.Cores = cores.Value()
	}
	return s, nil
}

// checkShares refuses shares the card cannot hold: no memory or more than the card, a compute
// cap outside 0-100, or caps that differ between the cards (HAMi-core takes one per container).
func checkShares(claim *resourceapi.ResourceClaim, shares []share) error {
	for _, s := range shares {
		if s.Bytes <= 0 || s.Bytes > s.CardBytes {
			return fmt.Errorf("%w: claim %s consumed %d bytes of %s, which has %d", ErrBadAllocation, klog.KObj(claim), s.Bytes, s.Device, s.CardBytes)
		}
		if s.Cores < 0 || s.Cores > contract.MaxCorePercent {
			return fmt.Errorf("%w: claim %s consumed %d %s of %s: want 0 to %d", ErrBadAllocation, klog.KObj(claim), s.Cores, CapacityCores,
				s.Device, contract.MaxCorePercent)
		}
		if s.Cores != shares[0].Cores {
			return fmt.Errorf("%w: claim %s consumed %d %s of %s but %d of %s: one compute cap holds all of a container's cards",
				ErrBadAllocation, klog.KObj(claim), shares[0].Cores, CapacityCores, shares[0].Device, s.Cores, s.Device)
		}
	}
	return nil
}

// podsOf lists the pods claim is reserved for.
func podsOf(claim *resourceapi.ResourceClaim) []consumer {
	var out []consumer
	for _, r := range claim.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, consumer{Name: r.Name, UID: r.UID})
		}
	}
	return out
}
