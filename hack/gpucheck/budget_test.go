package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// TestLargestFit runs workload.py's bisection with a fake allocator that fits up to a size:
// the answer is the largest multiple of the step that fits.
func TestLargestFit(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: workload.py's bisection is not checked here")
	}
	dir := t.TempDir()
	if _, err := writeSource(dir, "workload.py"); err != nil {
		t.Fatal(err)
	}
	const step = 16 << 20
	tests := []struct {
		name      string
		fits, hi  int64
		wantBytes int64
	}{
		{name: "everything fits", fits: 4 << 30, hi: 4 << 30, wantBytes: 4 << 30},
		{name: "a context's worth less", fits: 4<<30 - 500<<20, hi: 4 << 30, wantBytes: (4<<30 - 500<<20) / step * step},
		{name: "not a multiple of the step", fits: 4_000_000_000, hi: 4 << 30, wantBytes: 238 * step},
		{name: "nothing fits", fits: 0, hi: 4 << 30, wantBytes: 0},
		{name: "less than a step fits", fits: step - 1, hi: 4 << 30, wantBytes: 0},
		{name: "an 80 GiB card", fits: 79 << 30, hi: 85_520_809_984, wantBytes: 79 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code := "import sys; sys.path.insert(0, sys.argv[1]); import workload\n" +
				"calls = []\n" +
				"def fits(n):\n    calls.append(n)\n    return n <= int(sys.argv[2])\n" +
				"print(workload.largest_fit(fits, int(sys.argv[3])), len(calls))"
			out, err := exec.CommandContext(context.Background(), py, "-c", code, dir, itoa(tt.fits), itoa(tt.hi)).CombinedOutput()
			if err != nil {
				t.Fatalf("python3: %v\n%s", err, out)
			}
			f := strings.Fields(string(out))
			if len(f) != 2 || f[0] != itoa(tt.wantBytes) {
				t.Errorf("largest_fit = %q, want %d", out, tt.wantBytes)
			}
			if len(f) == 2 && len(f[1]) > 2 {
				t.Errorf("largest_fit tried %s sizes: not a bisection", f[1])
			}
		})
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestMeasureCards: every card's total, driver reserve (or why it is unknown), usable memory in
// units and free memory, from NVML.
func TestMeasureCards(t *testing.T) {
	tests := []struct {
		name string
		opts mockhost.Options
		want []measure
	}{
		{name: "T4-like cards, the reserve known", opts: mockhost.Options{GPUs: 2, MemoryBytes: 15 << 30, ReservedBytes: 450 << 20},
			want: []measure{
				{"GPU 0 (Mock NVIDIA A100-SXM4-40GB): total (NVML)", "15360 MiB"},
				{"GPU 0 (Mock NVIDIA A100-SXM4-40GB): reserved by the driver (NVML)", "450 MiB"},
				{"GPU 0 (Mock NVIDIA A100-SXM4-40GB): usable (total - reserved)", "14910 MiB = 14 units of 1Gi"},
				{"GPU 0 (Mock NVIDIA A100-SXM4-40GB): free at idle (NVML)", "14910 MiB"},
				{"GPU 1 (Mock NVIDIA A100-SXM4-40GB): total (NVML)", "15360 MiB"},
				{"GPU 1 (Mock NVIDIA A100-SXM4-40GB): reserved by the driver (NVML)", "450 MiB"},
				{"GPU 1 (Mock NVIDIA A100-SXM4-40GB): usable (total - reserved)", "14910 MiB = 14 units of 1Gi"},
				{"GPU 1 (Mock NVIDIA A100-SXM4-40GB): free at idle (NVML)", "14910 MiB"},
			}},
		{name: "an older driver", opts: mockhost.Options{GPUs: 1, MemoryBytes: 15 << 30, ReservedBytes: 450 << 20, NoMemoryInfoV2: true},
			want: []measure{
				{"GPU 0 (Mock NVIDIA A100-SXM4-40GB): total (NVML)", "15360 MiB"},
				{"GPU 0 (Mock NVIDIA A100-SXM4-40GB): reserved by the driver (NVML)", "unknown (the driver has no nvmlDeviceGetMemoryInfo_v2: the share-plugin counts the total)"},
				{"GPU 0 (Mock NVIDIA A100-SXM4-40GB): usable (total - reserved)", "15360 MiB = 15 units of 1Gi"},
				{"GPU 0 (Mock NVIDIA A100-SXM4-40GB): free at idle (NVML)", "14910 MiB"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := mockhost.New("dgxa100", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			r := &checkRun{nv: nvml.New(h)}
			r.measureCards()
			if diff := cmp.Diff(tt.want, r.res.measures); diff != "" {
				t.Errorf("measurements (-want,+got):\n%s", diff)
			}
			if len(r.res.checks) != 0 {
				t.Errorf("checks %+v, want none", r.res.checks)
			}
		})
	}
}

func TestWriteMeasures(t *testing.T) {
	r := &results{}
	var out bytes.Buffer
	if err := r.writeMeasures(&out); err != nil || out.Len() != 0 {
		t.Fatalf("no measurements: %q, %v; want nothing", out.String(), err)
	}
	r.measured("GPU 0 (Tesla T4): total (NVML)", "15360 MiB")
	r.measured("a | b", "")
	if err := r.writeMeasures(&out); err != nil {
		t.Fatal(err)
	}
	want := "| measurement | value |\n|---|---|\n| GPU 0 (Tesla T4): total (NVML) | 15360 MiB |\n| a \\| b | - |\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("table (-want,+got):\n%s", diff)
	}
}

// TestWorkloadSourcesHaveMaxAlloc: both workloads implement the maxalloc mode and print its key.
func TestWorkloadSourcesHaveMaxAlloc(t *testing.T) {
	for _, name := range []string{"workload.py", "alloc.cu"} {
		src, err := workloadSources.ReadFile(filepath.Base(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"` + modeMaxAlloc + `"`, keyMaxAlloc, keyMaxAllocError} {
			if !bytes.Contains(src, []byte(want)) {
				t.Errorf("%s lacks %s", name, want)
			}
		}
	}
}
