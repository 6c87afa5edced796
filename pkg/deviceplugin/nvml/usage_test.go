package nvml_test

import (
	"errors"
	"math"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

func TestUsage(t *testing.T) {
	tests := []struct {
		name   string
		procs  []gonvml.ProcessInfo
		util   uint32
		tamper func(d *server.Device)
		// reserved is what the driver keeps of the card's 16 GiB.
		reserved uint64
		want     nvml.Usage
	}{
		{
			name:  "idle card",
			want:  nvml.Usage{FreeBytes: 16 << 30, Utilization: 0},
			procs: nil,
		},
		{
			name:  "two processes",
			util:  73,
			procs: []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 3 << 30}, {Pid: 200, UsedGpuMemory: 1 << 30}},
			want: nvml.Usage{UsedBytes: 4 << 30, FreeBytes: 12 << 30, Utilization: 73, Processes: []nvml.Process{
				{PID: 100, UsedBytes: 3 << 30, UsedKnown: true}, {PID: 200, UsedBytes: 1 << 30, UsedKnown: true}}},
		},
		{
			name:  "memory of a process not available",
			procs: []gonvml.ProcessInfo{{Pid: 7, UsedGpuMemory: math.MaxUint64}},
			tamper: func(d *server.Device) {
				d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
					return gonvml.Memory{Total: 16 << 30, Used: 2 << 30}, gonvml.SUCCESS
				}
			},
			want: nvml.Usage{UsedBytes: 2 << 30, Utilization: 0, Processes: []nvml.Process{{PID: 7}}},
		},
		{
			name:  "utilization not supported is unknown, not an error",
			procs: []gonvml.ProcessInfo{{Pid: 9, UsedGpuMemory: 1 << 20}},
			tamper: func(d *server.Device) {
				d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) { return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED }
			},
			want: nvml.Usage{UsedBytes: 1 << 20, FreeBytes: 16<<30 - 1<<20, Utilization: nvml.UnknownUtilization, Processes: []nvml.Process{{PID: 9, UsedBytes: 1 << 20, UsedKnown: true}}},
		},
		{
			name:     "the driver's reserve is used, not free (nvmlDeviceGetMemoryInfo)",
			reserved: 450 << 20,
			procs:    []gonvml.ProcessInfo{{Pid: 5, UsedGpuMemory: 1 << 30}},
			want: nvml.Usage{UsedBytes: 1<<30 + 450<<20, FreeBytes: 15<<30 - 450<<20, Processes: []nvml.Process{
				{PID: 5, UsedBytes: 1 << 30, UsedKnown: true}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 1, MemoryBytes: 16 << 30, ReservedBytes: tt.reserved})
			if err != nil {
				t.Fatal(err)
			}
			h.SetUsage(0, tt.util, tt.procs)
			if tt.tamper != nil {
				tt.tamper(h.Devices[0].(*server.Device))
			}
			lib := nvml.New(h)
			if err := lib.Init(); err != nil {
				t.Fatal(err)
			}
			got, err := lib.Usage(0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Usage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(d *server.Device)
	}{
		{"memory info fails", func(d *server.Device) {
			d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{}, gonvml.ERROR_GPU_IS_LOST }
		}},
		{"utilization fails", func(d *server.Device) {
			d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) { return gonvml.Utilization{}, gonvml.ERROR_UNKNOWN }
		}},
		{"process list fails", func(d *server.Device) {
			d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) { return nil, gonvml.ERROR_NO_PERMISSION }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 1})
			if err != nil {
				t.Fatal(err)
			}
			tt.tamper(h.Devices[0].(*server.Device))
			lib := nvml.New(h)
			if err := lib.Init(); err != nil {
				t.Fatal(err)
			}
			if _, err := lib.Usage(0); err == nil {
				t.Fatal("Usage succeeded, want an error")
			} else if errors.Is(err, nvml.ErrLibraryNotFound) {
				t.Errorf("error %v says the library is missing", err)
			}
			if _, err := lib.Usage(5); err == nil {
				t.Error("Usage of a GPU that does not exist succeeded")
			}
		})
	}
}
