package nvml_test

import (
	"errors"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

func TestDevice(t *testing.T) {
	tests := []struct {
		name string
		host string
		opts mockhost.Options
		want []nvml.Device
	}{
		{
			name: "dgxa100 with mixed memory override",
			host: "dgxa100",
			opts: mockhost.Options{GPUs: 2, MemoryBytes: 40 << 30, MemoryByIndex: map[int]uint64{1: 80 << 30}},
			want: []nvml.Device{
				{Index: 0, UUID: "GPU-6a5e0000-0000-4000-8000-000000000000", Model: "Mock NVIDIA A100-SXM4-40GB", MemoryBytes: 40 << 30, Minor: 0, NUMANode: 0, BusID: "0000:07:00.0"},
				{Index: 1, UUID: "GPU-6a5e0001-0000-4000-8000-000000000001", Model: "Mock NVIDIA A100-SXM4-40GB", MemoryBytes: 80 << 30, Minor: 1, NUMANode: 1, BusID: "0000:0f:00.0"},
			},
		},
		{
			name: "dgxh100 keeps the mock's memory without override",
			host: "dgxh100",
			opts: mockhost.Options{GPUs: 1},
			want: []nvml.Device{
				{Index: 0, UUID: "GPU-6a5e0000-0000-4000-8000-000000000000", Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 81920 << 20, NUMANode: 0, BusID: "0000:07:00.0"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := mockhost.New(tt.host, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			lib := nvml.New(h)
			if err := lib.Init(); err != nil {
				t.Fatal(err)
			}
			n, err := lib.DeviceCount()
			if err != nil {
				t.Fatal(err)
			}
			var got []nvml.Device
			for i := range n {
				d, err := lib.Device(i)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, d)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("devices (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	h, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.InitFunc = func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }
	h.Devices[0].(*server.Device).GetNumaNodeIdFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	h.Devices[0].(*server.Device).GetMinorNumberFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_GPU_IS_LOST }
	lib := nvml.New(h)
	if err := lib.Init(); !errors.Is(err, nvml.ErrLibraryNotFound) {
		t.Errorf("Init() = %v, want ErrLibraryNotFound", err)
	}
	if _, err := lib.Device(0); err == nil {
		t.Error("Device(0) with a lost GPU: want an error")
	}
	if _, err := lib.Device(7); err == nil {
		t.Error("Device(7) of a 1-GPU host: want an error")
	}
	if _, err := mockhost.New("dgx-nope", mockhost.Options{}); !errors.Is(err, mockhost.ErrUnknownHost) {
		t.Errorf("mockhost.New(unknown) = %v, want ErrUnknownHost", err)
	}
}

func TestWatchXIDs(t *testing.T) {
	h, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	lib := nvml.New(h)
	d1, _ := lib.Device(1)
	w, err := lib.WatchXIDs([]string{d1.UUID})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	if _, err := w.Wait(time.Millisecond); !errors.Is(err, nvml.ErrTimeout) {
		t.Errorf("Wait without events = %v, want ErrTimeout", err)
	}
	h.InjectXID(1, 79)
	got, err := w.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(nvml.Event{UUID: d1.UUID, XID: 79}, got); diff != "" {
		t.Errorf("event (-want,+got):\n%s", diff)
	}
}
