package server

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestConnShed: a connection is shed once it has forwarded for the shed period, counted from
// its first forwarded call; a request served without ConnContext never is.
func TestConnShed(t *testing.T) {
	start := time.Unix(1700000000, 0)
	tests := []struct {
		name  string
		calls []time.Duration // after start, each a forwarded call of the connection
		want  []bool
	}{
		{name: "first call", calls: []time.Duration{0}, want: []bool{false}},
		{name: "within the period", calls: []time.Duration{0, 999 * time.Millisecond}, want: []bool{false, false}},
		{name: "past the period", calls: []time.Duration{0, time.Second, 2 * time.Second}, want: []bool{false, true, true}},
		{name: "counted from the first call", calls: []time.Duration{5 * time.Second, 5500 * time.Millisecond}, want: []bool{false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ConnContext(context.Background(), (net.Conn)(nil))
			for i, d := range tc.calls {
				if got := connShed(ctx, start.Add(d), time.Second); got != tc.want[i] {
					t.Errorf("call %d at +%v: shed %v, want %v", i, d, got, tc.want[i])
				}
			}
		})
	}
	if connShed(context.Background(), start.Add(time.Hour), time.Second) {
		t.Error("a request served without ConnContext was shed")
	}
}
