package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// draClaim is claim name of namespace ns, allocated with results; without results, not
// allocated.
func draClaim(name string, results ...resourceapi.DeviceRequestAllocationResult) resourceapi.ResourceClaim {
	c := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if results != nil {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	}
	return c
}

// share is one allocation result on device of pool n1, consuming memory and cores (omitted
// when negative).
func share(driver, device string, memory, cores int64) resourceapi.DeviceRequestAllocationResult {
	r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: "n1", Device: device,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{}}
	if memory >= 0 {
		r.ConsumedCapacity["memory"] = *resource.NewQuantity(memory, resource.BinarySI)
	}
	if cores >= 0 {
		r.ConsumedCapacity["cores"] = *resource.NewQuantity(cores, resource.DecimalSI)
	}
	return r
}

func TestDRACapacityOf(t *testing.T) {
	const gib, d = int64(1) << 30, "gpushare.aliyun.com"
	slices := []resourceapi.ResourceSlice{
		*DRASlice(d, "n1", []DRACard{{Index: 0, CapacityBytes: 10 * gib}, {Index: 1, CapacityBytes: 10 * gib}}, gib),
		{Spec: resourceapi.ResourceSliceSpec{Driver: "other.example.com", Pool: resourceapi.ResourcePool{Name: "n1"},
			Devices: []resourceapi.Device{{Name: "gpu-0"}}}},
	}
	tests := []struct {
		name   string
		claims []resourceapi.ResourceClaim
		want   DRACapacityCheck
	}{
		{name: "shared within capacity",
			claims: []resourceapi.ResourceClaim{draClaim("a", share(d, "gpu-0", 6*gib, 0)), draClaim("b", share(d, "gpu-0", 4*gib, 100)),
				draClaim("pending")},
			want: DRACapacityCheck{Cards: 2, Claims: 2, ConsumedBytes: 10 * gib, CapacityBytes: 20 * gib}},
		{name: "memory over capacity",
			claims: []resourceapi.ResourceClaim{draClaim("a", share(d, "gpu-1", 6*gib, 0)), draClaim("b", share(d, "gpu-1", 5*gib, 0))},
			want: DRACapacityCheck{Overcommitted: []string{"n1/gpu-1: memory 11811160064 of 10737418240"}, Cards: 2, Claims: 2,
				ConsumedBytes: 11 * gib, CapacityBytes: 20 * gib}},
		{name: "cores over capacity",
			claims: []resourceapi.ResourceClaim{draClaim("a", share(d, "gpu-0", gib, 60)), draClaim("b", share(d, "gpu-0", gib, 50))},
			want: DRACapacityCheck{Overcommitted: []string{"n1/gpu-0: cores 110 of 100"}, Cards: 2, Claims: 2,
				ConsumedBytes: 2 * gib, CapacityBytes: 20 * gib}},
		{name: "a whole card without consumed capacity, an unknown device, another driver's",
			claims: []resourceapi.ResourceClaim{draClaim("whole", share(d, "gpu-0", -1, -1)), draClaim("lost", share(d, "gpu-9", gib, 0)),
				draClaim("other", share("other.example.com", "gpu-0", 99*gib, 0))},
			want: DRACapacityCheck{Unmetered: []string{"ns/whole: n1/gpu-0"}, Unknown: []string{"ns/lost: n1/gpu-9"}, Cards: 2, Claims: 2,
				CapacityBytes: 20 * gib}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DRACapacityOf(d, slices, tt.claims)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DRACapacityOf (-want,+got):\n%s", diff)
			}
			if got.OK() != (len(tt.want.Overcommitted)+len(tt.want.Unmetered)+len(tt.want.Unknown) == 0) {
				t.Errorf("OK() = %v for %s", got.OK(), got)
			}
		})
	}
}
