package dra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDeviceOrders(t *testing.T) {
	// Card 2 is smaller: with 8 GiB on it, it has less left than card 1 with 12 GiB.
	cards := []CardUse{
		{Index: 3, CapacityBytes: 39 * gib},
		{Index: 1, CapacityBytes: 39 * gib, AllocatedBytes: 12 * gib},
		{Index: 2, CapacityBytes: 23 * gib, AllocatedBytes: 8 * gib},
		{Index: 0, CapacityBytes: 39 * gib},
		{Index: 4, CapacityBytes: 39 * gib, AllocatedBytes: 12 * gib},
	}
	tests := []struct {
		name  string
		order string
		want  []int
	}{
		{name: "index", order: OrderIndex, want: []int{0, 1, 2, 3, 4}},
		{name: "least left first, ties by index", order: OrderMostAllocated, want: []int{2, 1, 4, 0, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := append([]CardUse(nil), cards...)
			orders()[tt.order](got)
			idx := make([]int, len(got))
			for i, c := range got {
				idx[i] = c.Index
			}
			if diff := cmp.Diff(tt.want, idx); diff != "" {
				t.Errorf("order (-want,+got):\n%s", diff)
			}
		})
	}
}
