package mockhost

import (
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
