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
				{Index: 0, UUID: "GPU-6a5e0000-0000-4000-8000-000000000000", Model: "Mock NVIDIA A100-SXM4-40GB", MemoryBytes: 40 << 30, ReservedKnown: true, Minor: 0, NUMANode: 0, BusID: "0000:07:00.0"},
				{Index: 1, UUID: "GPU-6a5e0001-0000-4000-8000-000000000001", Model: "Mock NVIDIA A100-SXM4-40GB", MemoryBytes: 80 << 30, ReservedKnown: true, Minor: 1, NUMANode: 1, BusID: "0000:0f:00.0"},
			},
		},
		{
			name: "dgxh100 keeps the mock's memory without override",
			host: "dgxh100",
			opts: mockhost.Options{GPUs: 1},
			want: []nvml.Device{
				{Index: 0, UUID: "GPU-6a5e0000-0000-4000-8000-000000000000", Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 81920 << 20, ReservedKnown: true, NUMANode: 0, BusID: "0000:07:00.0"},
			},
		},
		{
			name: "a T4-like card: the driver's reserve from nvmlDeviceGetMemoryInfo_v2",
			host: "dgxa100",
			opts: mockhost.Options{GPUs: 2, MemoryBytes: 15 << 30, ReservedBytes: 450 << 20, ReservedByIndex: map[int]uint64{1: 0}},
			want: []nvml.Device{
				{Index: 0, UUID: "GPU-6a5e0000-0000-4000-8000-000000000000", Model: "Mock NVIDIA A100-SXM4-40GB", MemoryBytes: 15 << 30, ReservedBytes: 450 << 20, ReservedKnown: true, Minor: 0, NUMANode: 0, BusID: "0000:07:00.0"},
				{Index: 1, UUID: "GPU-6a5e0001-0000-4000-8000-000000000001", Model: "Mock NVIDIA A100-SXM4-40GB", MemoryBytes: 15 << 30, ReservedKnown: true, Minor: 1, NUMANode: 1, BusID: "0000:0f:00.0"},
			},
		},
		{
			name: "a library without nvmlDeviceGetMemoryInfo_v2: the total, the reserve unknown",
			host: "dgxa100",
			opts: mockhost.Options{GPUs: 1, MemoryBytes: 15 << 30, ReservedBytes: 450 << 20, NoMemoryInfoV2: true},
			want: []nvml.Device{
				{Index: 0, UUID: "GPU-6a5e0000-0000-4000-8000-000000000000", Model: "Mock NVIDIA A100-SXM4-40GB", MemoryBytes: 15 << 30, Minor: 0, NUMANode: 0, BusID: "0000:07:00.0"},
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

// TestDeviceMemoryFallback: a card whose nvmlDeviceGetMemoryInfo_v2 fails is sized from
// nvmlDeviceGetMemoryInfo's total, its reserve unknown; both failing is an error.
func TestDeviceMemoryFallback(t *testing.T) {
	tests := []struct {
		name    string
		v2, v1  gonvml.Return
		want    nvml.Device
		wantErr bool
	}{
		{name: "v2 not supported", v2: gonvml.ERROR_NOT_SUPPORTED, v1: gonvml.SUCCESS, want: nvml.Device{MemoryBytes: 15 << 30}},
		{name: "v2 version mismatch", v2: gonvml.ERROR_ARGUMENT_VERSION_MISMATCH, v1: gonvml.SUCCESS, want: nvml.Device{MemoryBytes: 15 << 30}},
		{name: "both fail", v2: gonvml.ERROR_GPU_IS_LOST, v1: gonvml.ERROR_GPU_IS_LOST, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 1, MemoryBytes: 15 << 30, ReservedBytes: 450 << 20})
			if err != nil {
				t.Fatal(err)
			}
			dev := h.Devices[0].(*server.Device)
			dev.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) { return gonvml.Memory_v2{}, tt.v2 }
			v1 := dev.GetMemoryInfoFunc
			dev.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
				m, _ := v1()
				return m, tt.v1
			}
			got, err := nvml.New(h).Device(0)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Device(0) = %+v, %v; want error %t", got, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			mem := nvml.Device{MemoryBytes: got.MemoryBytes, ReservedBytes: got.ReservedBytes, ReservedKnown: got.ReservedKnown}
			if diff := cmp.Diff(tt.want, mem); diff != "" {
				t.Errorf("memory (-want,+got):\n%s", diff)
			}
		})
	}
}
