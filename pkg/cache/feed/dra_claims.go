package feed

import (
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

// SetClaim charges an allocated claim's cards of the driver to the pod it is reserved for, or
// releases the claim once it is no longer allocated.
func (f *DRAFeed) SetClaim(claim *resourceapi.ResourceClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	charge, ok := f.chargeLocked(claim)
	switch {
	case ok:
		f.cache.SetClaim(claim.UID, charge)
		f.charged[claim.UID] = true
	case f.charged[claim.UID]:
		f.cache.RemoveClaim(claim.UID)
		delete(f.charged, claim.UID)
	}
}

// RemoveClaim releases a deleted claim.
func (f *DRAFeed) RemoveClaim(claim *resourceapi.ResourceClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.charged[claim.UID] {
		f.cache.RemoveClaim(claim.UID)
		delete(f.charged, claim.UID)
	}
}

// chargeLocked is what claim holds on the driver's cards; ok is false when it holds none (not
// allocated, or not on this driver's devices). A device result without consumed memory holds
// the whole card (the driver's rule for a claim that asks no memory). Caller holds f.mu.
func (f *DRAFeed) chargeLocked(claim *resourceapi.ResourceClaim) (cache.ClaimCharge, bool) {
	a := claim.Status.Allocation
	if a == nil {
		return cache.ClaimCharge{}, false
	}
	charge := claimOwner(claim)
	charge.PerGPU = map[int]int64{}
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if r.Driver != f.driver {
			continue
		}
		card, known := f.deviceLocked(r.Pool, r.Device)
		index, named := deviceIndex(r.Device)
		switch {
		case known:
			index = card.Index
		case !named:
			f.logger.Info("Claim holds a device the feed cannot place; not charging it", "claim", klog.KObj(claim), "node", r.Pool, "device", r.Device)
			continue
		}
		units := card.Capacity
		if q, ok := r.ConsumedCapacity[draCapacityMemory]; ok {
			units = (q.Value() + f.unit - 1) / f.unit // a part unit still holds the whole unit
		}
		charge.Node = r.Pool
		charge.PerGPU[index] += units
	}
	return charge, len(charge.PerGPU) > 0
}

// claimOwner is who a claim's memory is charged to: the pod it is reserved for, else the pod
// that owns it (allocated, not yet reserved), else the claim itself; and the key of its
// container, from the claim's pod claim name (draconvert.ClaimPrefix + key), else the claim's
// name.
func claimOwner(claim *resourceapi.ResourceClaim) cache.ClaimCharge {
	c := cache.ClaimCharge{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, Container: claim.Name}
	if podClaim, ok := claim.Annotations[resourceapi.PodResourceClaimAnnotation]; ok {
		c.Container = strings.TrimPrefix(podClaim, draconvert.ClaimPrefix)
	}
	for _, r := range claim.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			c.Name, c.UID = r.Name, r.UID
			return c
		}
	}
	for _, o := range claim.OwnerReferences {
		if o.APIVersion == "v1" && o.Kind == "Pod" {
			c.Name, c.UID = o.Name, o.UID
			return c
		}
	}
	return c
}

// AddDRAEventHandlers feeds f from the factory's ResourceSlice and ResourceClaim informers
// and returns the functions that report whether f has received each informer's first list.
// Call it before factory.Start.
func AddDRAEventHandlers(f *DRAFeed, factory informers.SharedInformerFactory) ([]toolscache.InformerSynced, error) {
	slices, err := factory.Resource().V1().ResourceSlices().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { withSlice(obj, f.SetSlice) },
		UpdateFunc: func(_, obj any) { withSlice(obj, f.SetSlice) },
		DeleteFunc: func(obj any) { withSlice(untombstone(obj), f.RemoveSlice) },
	})
	if err != nil {
		return nil, err
	}
	claims, err := factory.Resource().V1().ResourceClaims().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { withClaim(obj, f.SetClaim) },
		UpdateFunc: func(_, obj any) { withClaim(obj, f.SetClaim) },
		DeleteFunc: func(obj any) { withClaim(untombstone(obj), f.RemoveClaim) },
	})
	if err != nil {
		return nil, err
	}
	return []toolscache.InformerSynced{slices.HasSynced, claims.HasSynced}, nil
}

func withSlice(obj any, use func(*resourceapi.ResourceSlice)) {
	if s, ok := obj.(*resourceapi.ResourceSlice); ok {
		use(s)
	}
}

func withClaim(obj any, use func(*resourceapi.ResourceClaim)) {
	if c, ok := obj.(*resourceapi.ResourceClaim); ok {
		use(c)
	}
}
