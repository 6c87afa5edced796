package testing

import (
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ct "github.com/gpushare/gpushare/pkg/cache/testing"
)

// DRADriver is the DRA driver of DRACluster (the default of share-plugin --mode=dra).
const DRADriver = "gpushare.aliyun.com"

const gib = int64(1) << 30

// DRACluster returns Cluster plus a DRA node, as share-plugin --mode=dra and kube-scheduler's
// allocator leave it:
//   - node-d: no gpu-mem annotation or allocatable; the driver's slice publishes a 16 GiB T4
//     (gpu-0), a 16 GiB T4 (gpu-1) and a 24 GiB A10 (gpu-2) that a critical XID tainted
//     NoSchedule; another driver's slice on the node is not ours;
//   - claims: infer-a (default, 4 GiB) and infer-b (team-a, 6 GiB) on gpu-0, train-d (default,
//     two containers: 8 GiB and 2 GiB) on gpu-1; a claim not yet allocated and a claim of
//     another driver hold nothing of ours.
func DRACluster() []runtime.Object {
	objs := append(Cluster(), withIPs(ct.MakeNode("node-d").Obj(), "10.0.0.6"),
		draSlice("node-d-gpushare", DRADriver, "node-d",
			draDevice(0, "Tesla T4", 16, ""), draDevice(1, "Tesla T4", 16, ""),
			draDevice(2, "NVIDIA A10", 24, resourceapi.DeviceTaintEffectNoSchedule)),
		draSlice("node-d-nvidia", "gpu.nvidia.com", "node-d", draDevice(0, "Tesla T4", 16, "")))
	for _, p := range []struct {
		ns, name string
		claims   map[string]int64 // container key → GiB on the card
		device   string
	}{
		{ns: "default", name: "infer-a", claims: map[string]int64{"0": 4}, device: "gpu-0"},
		{ns: "team-a", name: "infer-b", claims: map[string]int64{"0": 6}, device: "gpu-0"},
		{ns: "default", name: "train-d", claims: map[string]int64{"0": 8, "1": 2}, device: "gpu-1"},
	} {
		objs = append(objs, running(ct.MakePod().Namespace(p.ns).Name(p.name).Node("node-d").Container()))
		for key, mem := range p.claims {
			objs = append(objs, DRAClaim(p.ns, p.name, key, DRADriver, "node-d", p.device, mem))
		}
	}
	unallocated := DRAClaim("default", "waiting", "0", DRADriver, "node-d", "gpu-0", 4)
	unallocated.Status = resourceapi.ResourceClaimStatus{}
	return append(objs, unallocated, DRAClaim("default", "other", "0", "gpu.nvidia.com", "node-d", "gpu-0", 4))
}

// DRAClaim is the claim of container key of pod ns/pod, allocated memGiB of device on node's
// pool of driver and reserved for the pod (UID "uid-<pod>", as ct.MakePod names it).
func DRAClaim(ns, pod, key, driver, node, device string, memGiB int64) *resourceapi.ResourceClaim {
	name := pod + "-gpushare-" + key
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("claim-" + ns + "-" + name),
			Annotations: map[string]string{resourceapi.PodResourceClaimAnnotation: "gpushare-" + key}},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: node, Device: device,
					ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{
						"memory": *resource.NewQuantity(memGiB*gib, resource.BinarySI)}}},
			}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID("uid-" + pod)}},
		},
	}
}

// draSlice is node's slice of driver, in its pool's first generation.
func draSlice(name, driver, node string, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, Devices: devices}}
}

// draDevice is card index as the driver publishes it ("gpu-<index>", attributes uuid, model
// and index, memory as consumable capacity), tainted with effect unless it is "".
func draDevice(index int64, model string, memGiB int64, effect resourceapi.DeviceTaintEffect) resourceapi.Device {
	i := strconv.FormatInt(index, 10)
	d := resourceapi.Device{Name: "gpu-" + i,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"uuid":  {StringValue: ptr.To("GPU-node-d-" + i)},
			"model": {StringValue: ptr.To(model)},
			"index": {IntValue: ptr.To(index)},
		},
		Capacity:                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: *resource.NewQuantity(memGiB*gib, resource.BinarySI)}},
		AllowMultipleAllocations: ptr.To(true),
	}
	if effect != "" {
		d.Taints = []resourceapi.DeviceTaint{{Key: DRADriver + "/unhealthy", Value: "xid-79", Effect: effect}}
	}
	return d
}

// DRAResources is the discovery document of resource.k8s.io/v1 for a fake clientset's
// Resources: an API server that serves DRA.
func DRAResources() []*metav1.APIResourceList {
	return []*metav1.APIResourceList{{GroupVersion: resourceapi.SchemeGroupVersion.String(), APIResources: []metav1.APIResource{
		{Name: "resourceslices", Kind: "ResourceSlice", Verbs: metav1.Verbs{"get", "list", "watch"}},
		{Name: "resourceclaims", Namespaced: true, Kind: "ResourceClaim", Verbs: metav1.Verbs{"get", "list", "watch"}},
	}}}
}
