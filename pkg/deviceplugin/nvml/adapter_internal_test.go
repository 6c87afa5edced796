package nvml

import (
	"math"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpushare/gpushare/pkg/contract"
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

func TestLinkOfLevel(t *testing.T) {
	tests := []struct {
		name  string
		level gonvml.GpuTopologyLevel
		want  contract.Link
	}{
		{name: "same board", level: gonvml.TOPOLOGY_INTERNAL, want: contract.LinkPIX},
		{name: "one switch", level: gonvml.TOPOLOGY_SINGLE, want: contract.LinkPIX},
		{name: "several switches", level: gonvml.TOPOLOGY_MULTIPLE, want: contract.LinkPXB},
		{name: "host bridge", level: gonvml.TOPOLOGY_HOSTBRIDGE, want: contract.LinkPHB},
		{name: "NUMA node", level: gonvml.TOPOLOGY_NODE, want: contract.LinkNODE},
		{name: "system", level: gonvml.TOPOLOGY_SYSTEM, want: contract.LinkSYS},
		{name: "a level this code does not know", level: 60, want: contract.LinkSYS},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := linkOfLevel(tc.level); got != tc.want {
				t.Errorf("linkOfLevel(%d) = %v, want %v", tc.level, got, tc.want)
			}
		})
	}
}

func TestBusIDOf(t *testing.T) {
	withBusID := func(field string, s string) gonvml.PciInfo {
		var p gonvml.PciInfo
		dst := p.BusId[:]
		if field == "legacy" {
			dst = p.BusIdLegacy[:]
		}
		for i := range s {
			dst[i] = int8(s[i]) //nolint:gosec // G115: ASCII test addresses
		}
		return p
	}
	tests := []struct {
		name string
		pci  gonvml.PciInfo
		want string
	}{
		{name: "bus ID", pci: withBusID("busId", "00000000:B7:00.0"), want: "0000:b7:00.0"},
		{name: "legacy bus ID only", pci: withBusID("legacy", "0000:4E:00.0"), want: "0000:4e:00.0"},
		{name: "numeric fields only", pci: gonvml.PciInfo{Domain: 1, Bus: 0x3b, Device: 2}, want: "0001:3b:02.0"},
		{name: "nothing", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := busIDOf(tc.pci); got != tc.want {
				t.Errorf("busIDOf() = %q, want %q", got, tc.want)
			}
		})
	}
}
