package mockhost

import (
	"errors"
	"testing"

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
