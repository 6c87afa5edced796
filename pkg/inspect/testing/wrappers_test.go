package testing

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/contract"
)

func TestGPUsSetsInventoryAndHealthyResources(t *testing.T) {
	tests := []struct {
		name      string
		gpus      []contract.GPU
		wantUnits int64
		wantCount int64
	}{
		{name: "all healthy", gpus: []contract.GPU{{Index: 0, Units: 16, Healthy: true}, {Index: 1, Units: 24, Healthy: true}}, wantUnits: 40, wantCount: 2},
		{name: "unhealthy card not allocatable", gpus: []contract.GPU{{Index: 0, Units: 16, Healthy: true}, {Index: 1, Units: 32}}, wantUnits: 16, wantCount: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := MakeNode("n").GPUs(t, tc.gpus...).Obj()
			got, err := contract.DecodeGPUs(n.Annotations[contract.DefaultNodeGPUsKey])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.gpus, got); diff != "" {
				t.Errorf("annotation (-want,+got):\n%s", diff)
			}
			units := n.Status.Allocatable[contract.DefaultResourceName]
			count := n.Status.Allocatable[contract.DefaultCountName]
			if diff := cmp.Diff([]int64{tc.wantUnits, tc.wantCount}, []int64{units.Value(), count.Value()}); diff != "" {
				t.Errorf("allocatable gpu-mem, gpu-count (-want,+got):\n%s", diff)
			}
		})
	}
}
