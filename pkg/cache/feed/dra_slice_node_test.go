package feed_test

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/cache/feed"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
)

func TestDRASliceNode(t *testing.T) {
	poolOnly := st.DRASlice("pool-only", testDriver, "", 1)
	poolOnly.Spec.NodeName = nil
	poolOnly.Spec.Pool.Name = "node-p"
	tests := []struct {
		name  string
		slice *resourceapi.ResourceSlice
		want  string
	}{
		{name: "node name", slice: st.DRASlice("s", testDriver, "node-a", 1), want: "node-a"},
		{name: "node name wins over the pool", slice: func() *resourceapi.ResourceSlice {
			s := st.DRASlice("s", testDriver, "node-a", 1)
			s.Spec.Pool.Name = "other"
			return s
		}(), want: "node-a"},
		{name: "no node name: the pool", slice: poolOnly, want: "node-p"},
		{name: "another driver", slice: st.DRASlice("s", "gpu.nvidia.com", "node-a", 1), want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := feed.DRASliceNode(tc.slice, testDriver); got != tc.want {
				t.Errorf("DRASliceNode = %q, want %q", got, tc.want)
			}
		})
	}
}
