package nvml

import "testing"

func TestUsableBytes(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name                     string
		total, reserved, reserve uint64
		want                     uint64
	}{
		{"the driver's reserve and the operator's come off the total", 16384 * mib, 450 * mib, 256 * mib, (16384 - 450 - 256) * mib},
		{"no reserve known: the total", 16384 * mib, 0, 0, 16384 * mib},
		{"the reserves take exactly all", 1024 * mib, 512 * mib, 512 * mib, 0},
		{"the reserves take more than all", 1024 * mib, 512 * mib, 2048 * mib, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Device{MemoryBytes: tc.total, ReservedBytes: tc.reserved}
			if got := d.UsableBytes(tc.reserve); got != tc.want {
				t.Errorf("UsableBytes(%d) of %d total, %d reserved = %d, want %d", tc.reserve, tc.total, tc.reserved, got, tc.want)
			}
		})
	}
}
