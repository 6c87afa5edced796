package framework

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// quantities compares quantities by value.
func quantities() cmp.Option {
	return cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
}

// TestDRASlice pins the shape of the slice to what share-plugin --mode=dra publishes (pkg/dra's
// TestPublishedSlice, less what a node without NVML placement has not): one pool named after
// the node, one device per card named gpu-<index>, attributes uuid, model and index, memory
// with a request policy of whole units (no step on a card of one unit, which the API refuses)
// and cores 0-100, none by default, shared by any number of claims.
func TestDRASlice(t *testing.T) {
	const gib = int64(1) << 30
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	device := func(i int, uuid, model string, memory string, step *resource.Quantity) resourceapi.Device {
		return resourceapi.Device{
			Name: "gpu-" + strconv.Itoa(i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"uuid": {StringValue: ptr.To(uuid)}, "model": {StringValue: ptr.To(model)}, "index": {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse(memory), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: q(memory),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: q("1Gi"), Max: q(memory), Step: step}}},
				"cores": {Value: resource.MustParse("100"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: q("0"),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: q("0"), Max: q("100"), Step: q("1")}}},
			},
			AllowMultipleAllocations: ptr.To(true),
		}
	}
	long := "NVIDIA A100-SXM4-40GB with a product name longer than the API's sixty-four bytes"
	cards := []DRACard{
		{Index: 0, UUID: "GPU-a", Model: "V100M32", CapacityBytes: 1000 * gib},
		{Index: 1, UUID: "GPU-b", Model: long, CapacityBytes: gib},
	}
	want := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "n1-gpushare.aliyun.com"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   "gpushare.aliyun.com",
			Pool:     resourceapi.ResourcePool{Name: "n1", Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To("n1"),
			Devices:  []resourceapi.Device{device(0, "GPU-a", "V100M32", "1000Gi", q("1Gi")), device(1, "GPU-b", long[:64], "1Gi", nil)},
		},
	}
	got := DRASlice("gpushare.aliyun.com", "n1", cards, gib)
	if diff := cmp.Diff(want, got, quantities()); diff != "" {
		t.Errorf("DRASlice (-want,+got):\n%s", diff)
	}
}
