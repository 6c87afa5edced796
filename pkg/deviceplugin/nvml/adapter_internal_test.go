package nvml

import (
	"math"
	"testing"
	"time"
)

func TestMillis32(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want uint32
	}{
		{name: "zero", d: 0, want: 0},
		{name: "rounds down", d: 1500 * time.Microsecond, want: 1},
		{name: "one second", d: time.Second, want: 1000},
		{name: "negative", d: -time.Second, want: 0},
		{name: "largest", d: math.MaxUint32 * time.Millisecond, want: math.MaxUint32},
		{name: "beyond uint32", d: (math.MaxUint32 + 1) * time.Millisecond, want: math.MaxUint32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := millis32(tc.d); got != tc.want {
				t.Errorf("millis32(%v) = %d, want %d", tc.d, got, tc.want)
			}
		})
	}
}
