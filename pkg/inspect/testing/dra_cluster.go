package testing

import (
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ct "github.com/gpushare/gpushare/pkg/cache/testing"
)

// DRADriver is the DRA driver of DRACluster (the default of share-plugin --mode=dra).
const DRADriver = "gpushare.aliyun.com"

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
	c := ct.DRAClaim(name, pod, key, driver, node, map[string]int64{device: memGiB})
	c.Namespace, c.UID = ns, types.UID("claim-"+ns+"-"+name)
	return c
}

// draSlice is node's slice of driver, in its pool's first generation.
func draSlice(name, driver, node string, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return ct.DRASlice(name, driver, node, 1, devices...)
}

// draDevice is card index of node-d as the driver publishes it (ct.DRADevice) with its model.
func draDevice(index int64, model string, memGiB int64, effect resourceapi.DeviceTaintEffect) resourceapi.Device {
	d := ct.DRADevice(DRADriver, index, memGiB, effect)
	d.Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptr.To("GPU-node-d-" + strconv.FormatInt(index, 10))}
	d.Attributes["model"] = resourceapi.DeviceAttribute{StringValue: ptr.To(model)}
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
