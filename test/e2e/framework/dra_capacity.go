package framework

import (
	"context"
	"fmt"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/dra"
)

// DRACapacityCheck is the end-of-run check of DRA mode on the API server's objects: per card
// (a device of the driver), the capacity the allocated claims consumed against what the card
// publishes.
type DRACapacityCheck struct {
	// Overcommitted lists the cards whose allocated claims consumed, together, more memory or
	// cores than the card publishes, as "pool/device: <capacity> <consumed> of <published>".
	Overcommitted []string
	// Unmetered lists the driver's allocation results that consumed no memory capacity (an
	// allocator without consumable capacity hands the claim the whole card), as
	// "namespace/claim: pool/device".
	Unmetered []string
	// Unknown lists the driver's allocation results naming a device no slice publishes.
	Unknown []string
	// Cards counts the driver's devices, Claims the allocated claims with a device of it.
	Cards, Claims int
	// ConsumedBytes is the memory the allocated claims consumed on the driver's devices;
	// CapacityBytes the memory the devices publish.
	ConsumedBytes, CapacityBytes int64
}

// OK is true when nothing is wrong.
func (i DRACapacityCheck) OK() bool {
	return len(i.Overcommitted) == 0 && len(i.Unmetered) == 0 && len(i.Unknown) == 0
}

func (i DRACapacityCheck) String() string {
	return fmt.Sprintf("%d of %d cards over capacity %v, %d results without consumed memory %v, %d results on unknown devices %v (%d claims allocated)",
		len(i.Overcommitted), i.Cards, i.Overcommitted, len(i.Unmetered), i.Unmetered, len(i.Unknown), i.Unknown, i.Claims)
}

// draCardUse is what one device publishes and what the claims consumed of it.
type draCardUse struct {
	capacity, consumed map[resourceapi.QualifiedName]int64
}

// DRACapacityOf adds up, per device of driver in slices, the memory and cores that the
// allocated claims consumed of it (consumedCapacity of each allocation result) and compares
// them with what the device publishes.
func DRACapacityOf(driver string, slices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim) DRACapacityCheck {
	var inv DRACapacityCheck
	cards := map[string]*draCardUse{}
	for i := range slices {
		s := &slices[i].Spec
		if s.Driver != driver {
			continue
		}
		for _, d := range s.Devices {
			c := &draCardUse{capacity: map[resourceapi.QualifiedName]int64{}, consumed: map[resourceapi.QualifiedName]int64{}}
			for name, capacity := range d.Capacity {
				c.capacity[name] = capacity.Value.Value()
			}
			cards[s.Pool.Name+"/"+d.Name] = c
			inv.CapacityBytes += c.capacity[dra.CapacityMemory]
		}
	}
	inv.Cards = len(cards)
	for i := range claims {
		inv.addClaim(driver, &claims[i], cards)
	}
	for key, c := range cards {
		for _, name := range []resourceapi.QualifiedName{dra.CapacityMemory, dra.CapacityCores} {
			if c.consumed[name] > c.capacity[name] {
				inv.Overcommitted = append(inv.Overcommitted, fmt.Sprintf("%s: %s %d of %d", key, name, c.consumed[name], c.capacity[name]))
			}
		}
	}
	sort.Strings(inv.Overcommitted)
	return inv
}

// addClaim charges claim's allocation results of driver to their cards.
func (i *DRACapacityCheck) addClaim(driver string, claim *resourceapi.ResourceClaim, cards map[string]*draCardUse) {
	if claim.Status.Allocation == nil {
		return
	}
	counted := false
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != driver {
			continue
		}
		if !counted {
			i.Claims, counted = i.Claims+1, true
		}
		key := r.Pool + "/" + r.Device
		c, ok := cards[key]
		if !ok {
			i.Unknown = append(i.Unknown, claim.Namespace+"/"+claim.Name+": "+key)
			continue
		}
		mem, ok := r.ConsumedCapacity[dra.CapacityMemory]
		if !ok {
			i.Unmetered = append(i.Unmetered, claim.Namespace+"/"+claim.Name+": "+key)
		}
		for name, q := range r.ConsumedCapacity {
			c.consumed[name] += q.Value()
		}
		i.ConsumedBytes += mem.Value()
	}
}

// CheckDRACapacity reads every ResourceSlice and ResourceClaim from the API server and checks
// the devices of driver (DRACapacityOf).
func (c *Cluster) CheckDRACapacity(ctx context.Context, driver string) (DRACapacityCheck, error) {
	slices, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return DRACapacityCheck{}, fmt.Errorf("list ResourceSlices: %w", err)
	}
	claims, err := c.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return DRACapacityCheck{}, fmt.Errorf("list ResourceClaims: %w", err)
	}
	return DRACapacityOf(driver, slices.Items, claims.Items), nil
}
