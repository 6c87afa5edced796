package gpumem_test

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

func TestAllocationEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b gpumem.Allocation
		want bool
	}{
		{name: "both nil", want: true},
		{name: "nil and empty", a: gpumem.Allocation{}, want: true},
		{name: "same", a: gpumem.Allocation{"0": {0: 4, 1: 2}, "init-0": {0: 1}}, b: gpumem.Allocation{"init-0": {0: 1}, "0": {1: 2, 0: 4}}, want: true},
		{name: "empty and nil card maps", a: gpumem.Allocation{"0": {}}, b: gpumem.Allocation{"0": nil}, want: true},
		{name: "other units", a: gpumem.Allocation{"0": {0: 4}}, b: gpumem.Allocation{"0": {0: 5}}},
		{name: "other card", a: gpumem.Allocation{"0": {0: 4}}, b: gpumem.Allocation{"0": {1: 4}}},
		{name: "other container", a: gpumem.Allocation{"0": {0: 4}}, b: gpumem.Allocation{"1": {0: 4}}},
		{name: "one more card", a: gpumem.Allocation{"0": {0: 4}}, b: gpumem.Allocation{"0": {0: 4, 1: 4}}},
		{name: "one more container", a: gpumem.Allocation{"0": {0: 4}}, b: gpumem.Allocation{"0": {0: 4}, "1": {1: 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Equal(tt.b); got != tt.want {
				t.Errorf("%v.Equal(%v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := tt.b.Equal(tt.a); got != tt.want {
				t.Errorf("%v.Equal(%v) = %v, want %v", tt.b, tt.a, got, tt.want)
			}
		})
	}
}
