package mockhost

import (
	"errors"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

func TestNames(t *testing.T) {
	if diff := cmp.Diff([]string{"dgxa100", "dgxb200", "dgxh100", "dgxh200"}, Names()); diff != "" {
		t.Errorf("Names() (-want,+got):\n%s", diff)
	}
}

func TestNewOverridesMemory(t *testing.T) {
	h, err := New("dgxh200", Options{GPUs: 3, MemoryByIndex: map[int]uint64{2: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Devices) != 3 {
		t.Fatalf("GPUs = %d, want 3", len(h.Devices))
	}
	mem, _ := h.Devices[2].GetMemoryInfo()
	if mem.Total != 1<<30 || mem.Free != 1<<30 {
		t.Errorf("memory of GPU 2 = %+v, want 1Gi total and free", mem)
	}
}

func TestLinkLayouts(t *testing.T) {
	tests := []struct {
		name    string
		links   string
		wantErr bool
	}{
		{name: "default", links: ""},
		{name: "nvswitch", links: LinksNVSwitch},
		{name: "pcie", links: LinksPCIe},
		{name: "pairs", links: LinksPairs},
		{name: "unknown", links: "mesh", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New("dgxa100", Options{GPUs: 2, Links: tt.links})
			if (err != nil) != tt.wantErr {
				t.Fatalf("New(Links: %q) = %v, want error %t", tt.links, err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, ErrUnknownLinks) {
				t.Errorf("New(Links: %q) = %v, want ErrUnknownLinks", tt.links, err)
			}
		})
	}
}

// TestReservedMemory: every host reports the driver's reserve through
// nvmlDeviceGetMemoryInfo_v2 when asked, and counts it as used in nvmlDeviceGetMemoryInfo.
func TestReservedMemory(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			h, err := New(name, Options{GPUs: 2, ReservedBytes: 450 << 20, ReservedByIndex: map[int]uint64{1: 1 << 30}})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []uint64{450 << 20, 1 << 30} {
				v2, ret := h.Devices[i].GetMemoryInfo_v2()
				if ret != gonvml.SUCCESS || v2.Reserved != want || v2.Used != 0 || v2.Free != v2.Total-want {
					t.Errorf("GPU %d: GetMemoryInfo_v2 = %+v, %v; want %d reserved, the rest free", i, v2, ret, want)
				}
				v1, _ := h.Devices[i].GetMemoryInfo()
				if v1.Total != v2.Total || v1.Used != want || v1.Free != v2.Free {
					t.Errorf("GPU %d: GetMemoryInfo = %+v; want the reserve used (%d)", i, v1, want)
				}
			}
			if err := h.LookupSymbol("nvmlDeviceGetMemoryInfo_v2"); err != nil {
				t.Errorf("LookupSymbol(nvmlDeviceGetMemoryInfo_v2) = %v, want found", err)
			}
		})
	}
	h, err := New("dgxa100", Options{GPUs: 1, NoMemoryInfoV2: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo_v2"); !errors.Is(err, ErrNoSymbol) {
		t.Errorf("NoMemoryInfoV2: LookupSymbol = %v, want ErrNoSymbol", err)
	}
	if err := h.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo"); err != nil {
		t.Errorf("NoMemoryInfoV2: LookupSymbol(nvmlDeviceGetMemoryInfo) = %v, want found", err)
	}
	if _, err := New("dgxa100", Options{GPUs: 1, MemoryBytes: 1 << 30, ReservedBytes: 2 << 30}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("more reserved than the card has: %v, want ErrBadOptions", err)
	}
}
