package testing

import (
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The DRA objects of the extender's DRA mode, as share-plugin --mode=dra publishes them and
// kube-scheduler's allocator allocates them: a device per card, named gpu-<index>.

const gib = int64(1) << 30

// DRADevice is one card as driver publishes it: NVML index, memory in GiB, tainted with
// effect (none when "").
func DRADevice(driver string, index, memGiB int64, effect resourceapi.DeviceTaintEffect) resourceapi.Device {
	d := resourceapi.Device{
		Name: "gpu-" + strconv.FormatInt(index, 10),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"uuid":  {StringValue: ptr.To("GPU-" + strconv.FormatInt(index, 10))},
			"model": {StringValue: ptr.To("Tesla T4")},
			"index": {IntValue: ptr.To(index)},
		},
		Capacity:                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: *resource.NewQuantity(memGiB*gib, resource.BinarySI)}},
		AllowMultipleAllocations: ptr.To(true),
	}
	if effect != "" {
		d.Taints = []resourceapi.DeviceTaint{{Key: driver + "/unhealthy", Value: "xid-79", Effect: effect}}
	}
	return d
}

// DRASlice is node's slice of driver with devices, in the pool's generation gen.
func DRASlice(name, driver, node string, gen int64, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1}, Devices: devices}}
}

// DRAClaim is a claim (namespace default, UID "claim-<name>") of pod's container key, allocated
// by driver the given devices of node with the given GiB of memory each (0: no consumed
// capacity; nil devices: not allocated), reserved for the pod (UID "uid-<pod>") when pod is set.
func DRAClaim(name, pod, key, driver, node string, devices map[string]int64) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("claim-" + name),
		Annotations: map[string]string{resourceapi.PodResourceClaimAnnotation: "gpushare-" + key}}}
	if devices == nil {
		return c
	}
	a := &resourceapi.AllocationResult{}
	for dev, mem := range devices {
		r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: node, Device: dev}
		if mem > 0 {
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": *resource.NewQuantity(mem*gib, resource.BinarySI)}
		}
		a.Devices.Results = append(a.Devices.Results, r)
	}
	c.Status.Allocation = a
	if pod != "" {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID("uid-" + pod)}}
	}
	return c
}
