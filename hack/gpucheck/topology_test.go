package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// smiH100 is nvidia-smi topo -m on an 8-GPU HGX H100 with two NICs (trimmed to 4 GPUs).
const smiH100 = "\x1b[4m\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n" +
	"GPU0\t X \tNV18\tNV18\tNV18\tPXB\tSYS\t0-55,112-167\t0\t\tN/A\n" +
	"GPU1\tNV18\t X \tNV18\tNV18\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n" +
	"GPU2\tNV18\tNV18\t X \tNV18\tSYS\tPXB\t56-111,168-223\t1\t\tN/A\n" +
	"GPU3\tNV18\tNV18\tNV18\t X \tSYS\tSYS\t56-111,168-223\t1\t\tN/A\n" +
	"NIC0\tPXB\tSYS\tSYS\tSYS\t X \tSYS\n" +
	"NIC1\tSYS\tSYS\tPXB\tSYS\tSYS\t X \n" +
	"\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n" +
	"NIC Legend:\n\n  NIC0: mlx5_0\n"

// smiOf renders rows as nvidia-smi topo -m prints them, with a NUMA Affinity column.
func smiOf(numa []string, rows ...string) string {
	var b strings.Builder
	for i := range rows {
		b.WriteString("\tGPU" + strconv.Itoa(i))
	}
	b.WriteString("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n")
	for i, r := range rows {
		toks := strings.Fields(r)
		toks[i] = " X "
		b.WriteString("GPU" + strconv.Itoa(i) + "\t" + strings.Join(toks, "\t") + "\t0-7\t" + numa[i] + "\t\tN/A\n")
	}
	return b.String() + "\nLegend:\n\n  X    = Self\n"
}

func TestParseSMITopology(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    smiTopology
		wantErr bool
	}{
		{name: "HGX H100 with NICs and escapes", out: smiH100, want: smiTopology{
			links: [][]string{{"X", "NV18", "NV18", "NV18"}, {"NV18", "X", "NV18", "NV18"}, {"NV18", "NV18", "X", "NV18"}, {"NV18", "NV18", "NV18", "X"}},
			numa:  []string{"0", "0", "1", "1"}}},
		{name: "PCIe pair without NUMA", out: smiOf([]string{"N/A", "N/A"}, "X PIX", "PIX X"), want: smiTopology{
			links: [][]string{{"X", "PIX"}, {"PIX", "X"}}, numa: []string{"N/A", "N/A"}}},
		{name: "old nvidia-smi without the NUMA column", out: "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t0-7\n",
			want: smiTopology{links: [][]string{{"X", "SOC"}, {"SOC", "X"}}}},
		{name: "not a matrix", out: "No devices were found\n", wantErr: true},
		{name: "rows missing", out: "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSYS\t0-7\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSMITopology(tt.out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseSMITopology() = %v, want error %t", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(smiTopology{})); diff != "" {
				t.Errorf("parseSMITopology() (-want,+got):\n%s", diff)
			}
		})
	}
}

// hostRun is a checkRun over a mock host changed by change.
func hostRun(t *testing.T, o mockhost.Options, change func(h *mockhost.Host)) *checkRun {
	t.Helper()
	h, err := mockhost.New("dgxa100", o)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(h)
	}
	return &checkRun{nv: nvml.New(h)}
}

func smiSays(out string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return out, nil }
}

func TestCheckTopology(t *testing.T) {
	tests := []struct {
		name   string
		opts   mockhost.Options
		change func(h *mockhost.Host)
		smi    func(context.Context) (string, error)
		// want is each row's name and result; wantNote is part of a note.
		want     []string
		wantNote string
	}{
		{name: "one card: a SKIP note, no check", opts: mockhost.Options{GPUs: 1}, smi: smiSays("unused"), wantNote: topoSkipNote},
		{name: "NVSwitch box agreeing with nvidia-smi", opts: mockhost.Options{GPUs: 2},
			smi:      smiSays(smiOf([]string{"0", "1"}, "X NV12", "NV12 X")),
			want:     []string{"PASS topology: the share-plugin reads", "PASS topology: links agree", "PASS topology: NUMA nodes agree"},
			wantNote: "GPU0  X     NV12  0"},
		{name: "PCIe box, nvidia-smi disagrees on a link and a NUMA node", opts: mockhost.Options{GPUs: 4, Links: mockhost.LinksPCIe},
			smi:  smiSays(smiOf([]string{"0", "0", "1", "N/A"}, "X PIX NODE NODE", "PIX X NODE NODE", "NODE NODE X PIX", "NODE NODE PXB X")),
			want: []string{"PASS topology: the share-plugin reads", "FAIL topology: links agree", "FAIL topology: NUMA nodes agree"}},
		{name: "no nvidia-smi: the matrix only", opts: mockhost.Options{GPUs: 2, Links: mockhost.LinksPairs},
			want: []string{"PASS topology: the share-plugin reads"}, wantNote: "nvidia-smi not found"},
		{name: "nvidia-smi fails", opts: mockhost.Options{GPUs: 2},
			smi:  func(context.Context) (string, error) { return "", errors.New("exit status 255") },
			want: []string{"PASS topology: the share-plugin reads", "FAIL topology: nvidia-smi topo -m"}},
		{name: "NVML cannot read the links", opts: mockhost.Options{GPUs: 2},
			change: func(h *mockhost.Host) {
				h.Devices[1].(*server.Device).GetNvLinkStateFunc = func(int) (gonvml.EnableState, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
			},
			smi: smiSays("unused"), want: []string{"FAIL topology: the share-plugin reads"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			r := hostRun(t, tt.opts, tt.change)
			r.checkTopology(ctx, tt.smi)
			var got []string
			for _, c := range r.res.checks {
				verdict := "FAIL "
				if c.Pass {
					verdict = "PASS "
				}
				got = append(got, verdict+c.Name)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("checks %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("check %d = %q, want %q...", i, got[i], tt.want[i])
				}
			}
			if notes := strings.Join(r.notes, "\n"); !strings.Contains(notes, tt.wantNote) {
				t.Errorf("notes lack %q:\n%s", tt.wantNote, notes)
			}
		})
	}
}

func TestRunTopologyOnly(t *testing.T) {
	tests := []struct {
		name     string
		gpus     int
		wantCode int
		wantOut  string
	}{
		{name: "one card is a skip, never a pass", gpus: 1, wantCode: exitSkip, wantOut: topoSkipNote},
		{name: "two cards", gpus: 2, wantCode: 0, wantOut: "gpu-check: 3 passed, 0 failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			r := hostRun(t, mockhost.Options{GPUs: tt.gpus}, nil)
			var out strings.Builder
			code := runTopologyOnly(ctx, r.nv, smiSays(smiOf([]string{"0", "1"}, "X NV12", "NV12 X")), &out)
			if code != tt.wantCode || !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("runTopologyOnly() = %d, %q; want %d and %q", code, out.String(), tt.wantCode, tt.wantOut)
			}
		})
	}
}
