package mockhost

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

func TestParseProcesses(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    map[int][]gonvml.ProcessInfo
		wantErr bool
	}{
		{name: "two cards", data: `{"0": [{"pid": 1234, "usedBytes": 1073741824}, {"pid": 7, "usedBytes": 0}], "1": []}`,
			want: map[int][]gonvml.ProcessInfo{0: {{Pid: 1234, UsedGpuMemory: 1 << 30}, {Pid: 7}}}},
		{name: "empty object", data: `{}`, want: map[int][]gonvml.ProcessInfo{}},
		{name: "index past the host's cards", data: `{"2": [{"pid": 1, "usedBytes": 1}]}`, wantErr: true},
		{name: "not an index", data: `{"GPU-0": [{"pid": 1, "usedBytes": 1}]}`, wantErr: true},
		{name: "negative index", data: `{"-1": []}`, wantErr: true},
		{name: "no pid", data: `{"0": [{"usedBytes": 1}]}`, wantErr: true},
		{name: "unknown field", data: `{"0": [{"pid": 1, "used": 1}]}`, wantErr: true},
		{name: "negative bytes", data: `{"0": [{"pid": 1, "usedBytes": -1}]}`, wantErr: true},
		{name: "truncated", data: `{"0": [{"pid": 1,`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcesses([]byte(tt.data), 2)
			if tt.wantErr {
				if !errors.Is(err, ErrBadProcessesFile) {
					t.Fatalf("error = %v, want ErrBadProcessesFile", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("processes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestFollowProcessesFile: the cards report the file's processes as it comes, changes, breaks
// and goes.
func TestFollowProcessesFile(t *testing.T) {
	h, err := New("dgxa100", Options{GPUs: 2, MemoryBytes: 16 << 30})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "procs.json")
	h.SetUsage(0, 30, []gonvml.ProcessInfo{{Pid: 99, UsedGpuMemory: 1}})
	h.FollowProcessesFile(path)
	write := func(data string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	type reading struct {
		Procs []gonvml.ProcessInfo
		Ret   gonvml.Return
		Used  uint64
	}
	read := func(i int) reading {
		procs, ret := h.Devices[i].GetComputeRunningProcesses()
		mem, _ := h.Devices[i].GetMemoryInfo()
		return reading{procs, ret, mem.Used}
	}
	steps := []struct {
		name         string
		do           func()
		want0, want1 reading
	}{
		{name: "no file: no processes", do: func() {}, want0: reading{Ret: gonvml.SUCCESS}, want1: reading{Ret: gonvml.SUCCESS}},
		{name: "a process on card 1", do: func() { write(`{"1": [{"pid": 1234, "usedBytes": 1073741824}]}`) },
			want0: reading{Ret: gonvml.SUCCESS},
			want1: reading{Procs: []gonvml.ProcessInfo{{Pid: 1234, UsedGpuMemory: 1 << 30}}, Ret: gonvml.SUCCESS, Used: 1 << 30}},
		{name: "rewritten", do: func() { write(`{"0": [{"pid": 5, "usedBytes": 2}], "1": [{"pid": 6, "usedBytes": 3}]}`) },
			want0: reading{Procs: []gonvml.ProcessInfo{{Pid: 5, UsedGpuMemory: 2}}, Ret: gonvml.SUCCESS, Used: 2},
			want1: reading{Procs: []gonvml.ProcessInfo{{Pid: 6, UsedGpuMemory: 3}}, Ret: gonvml.SUCCESS, Used: 3}},
		{name: "broken: the lists fail, memory keeps the last good", do: func() { write(`{"0": [`) },
			want0: reading{Ret: gonvml.ERROR_UNKNOWN, Used: 2}, want1: reading{Ret: gonvml.ERROR_UNKNOWN, Used: 3}},
		{name: "fixed", do: func() { write(`{"0": [{"pid": 8, "usedBytes": 4}]}`) },
			want0: reading{Procs: []gonvml.ProcessInfo{{Pid: 8, UsedGpuMemory: 4}}, Ret: gonvml.SUCCESS, Used: 4},
			want1: reading{Ret: gonvml.SUCCESS}},
		{name: "removed", do: func() {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, want0: reading{Ret: gonvml.SUCCESS}, want1: reading{Ret: gonvml.SUCCESS}},
	}
	for _, st := range steps {
		st.do()
		if diff := cmp.Diff([]reading{st.want0, st.want1}, []reading{read(0), read(1)}); diff != "" {
			t.Errorf("%s: cards (-want,+got):\n%s", st.name, diff)
		}
		if u, _ := h.Devices[0].GetUtilizationRates(); u.Gpu != 30 {
			t.Errorf("%s: utilization %d, want SetUsage's 30", st.name, u.Gpu)
		}
	}
}
