package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMain lets the test binary be the namespace helper, as the gpucheck binary is: the
// launcher re-executes its own program with envNSExec set.
func TestMain(m *testing.M) {
	if arg, ok := os.LookupEnv(envNSExec); ok {
		os.Exit(nsExecMain(arg))
	}
	os.Exit(m.Run())
}

// fakeHost answers every question as a machine that can run the check.
func fakeHost() host {
	return host{
		euid:     func() int { return 0 },
		stat:     func(string) (os.FileInfo, error) { return nil, nil },
		lookPath: func(string) (string, error) { return "", errors.New("not found") },
		run: func(context.Context, string, ...string) ([]byte, error) {
			return nil, nil
		},
		initNVML:       func() error { return nil },
		mountNamespace: func(context.Context) error { return nil },
	}
}

func TestPreflight(t *testing.T) {
	tests := []struct {
		name   string
		change func(h *host)
		// wantWhy is part of the reason; "" when the check can run.
		wantWhy string
	}{
		{name: "everything there, no nvidia-smi", change: func(*host) {}},
		{name: "nvidia-smi works", change: func(h *host) {
			h.lookPath = func(string) (string, error) { return "/usr/bin/nvidia-smi", nil }
		}},
		{name: "not root", change: func(h *host) { h.euid = func() int { return 1000 } }, wantWhy: "not root (uid 1000)"},
		{name: "no GPU", change: func(h *host) {
			h.stat = func(p string) (os.FileInfo, error) {
				return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
			}
		}, wantWhy: "no NVIDIA GPU: /dev/nvidia0: file does not exist"},
		{name: "nvidia-smi fails", change: func(h *host) {
			h.lookPath = func(string) (string, error) { return "/usr/bin/nvidia-smi", nil }
			h.run = func(context.Context, string, ...string) ([]byte, error) {
				return []byte("\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"), errors.New("exit status 9")
			}
		}, wantWhy: "nvidia-smi -L failed (exit status 9): NVIDIA-SMI has failed because it couldn't communicate"},
		{name: "no libnvidia-ml", change: func(h *host) {
			h.initNVML = func() error { return errors.New("nvml init: libnvidia-ml.so.1 not found") }
		}, wantWhy: "NVML unusable (libnvidia-ml.so.1 missing or the driver not loaded): nvml init: libnvidia-ml.so.1 not found"},
		{name: "no mount namespaces", change: func(h *host) {
			h.mountNamespace = func(context.Context) error { return errors.New("operation not permitted") }
		}, wantWhy: "cannot start a process in a new mount namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakeHost()
			tt.change(&h)
			var out bytes.Buffer
			code, ok := preflight(context.Background(), h, &out)
			if tt.wantWhy == "" {
				if !ok || code != 0 || out.Len() != 0 {
					t.Fatalf("preflight = %d, %t, %q; want to run", code, ok, out.String())
				}
				return
			}
			if ok || code != exitSkip {
				t.Fatalf("preflight = %d, %t; want exit %d", code, ok, exitSkip)
			}
			got := out.String()
			if !strings.HasPrefix(got, "SKIP gpu-check: ") || !strings.Contains(got, tt.wantWhy) || !strings.HasSuffix(got, " — this is not a pass\n") {
				t.Errorf("banner %q; want SKIP gpu-check: ...%s... — this is not a pass", got, tt.wantWhy)
			}
		})
	}
}

// TestPreflightThisMachine: without a GPU, the real probe skips with 77, never passes.
func TestPreflightThisMachine(t *testing.T) {
	if _, err := os.Stat(gpuDevice); err == nil {
		t.Skip("this machine has an NVIDIA GPU: the skip cannot be seen here")
	}
	var out bytes.Buffer
	code, ok := preflight(context.Background(), realHost(func() error { return nil }), &out)
	if ok || code != exitSkip || !strings.HasPrefix(out.String(), "SKIP gpu-check: ") {
		t.Fatalf("preflight = %d, %t, %q; want a skip (%d)", code, ok, out.String(), exitSkip)
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		name, line   string
		wantK, wantV string
		wantOK       bool
	}{
		{name: "bytes", line: "GPUCHECK total_bytes=4294967296", wantK: keyTotal, wantV: "4294967296", wantOK: true},
		{name: "CRLF", line: "GPUCHECK alloc_past=oom\r\n", wantK: keyPast, wantV: "oom", wantOK: true},
		{name: "value with = and spaces", line: "GPUCHECK alloc_past_error=OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB; a=b",
			wantK: keyPastError, wantV: "OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB; a=b", wantOK: true},
		{name: "empty value", line: "GPUCHECK nvml_error=", wantK: keyNVMLError, wantV: "", wantOK: true},
		{name: "HAMi-core log line", line: "[HAMI-core Msg(1:140:multiprocess_memory_limit.c:499)]: Initializing....."},
		{name: "prefix without space", line: "GPUCHECKtotal_bytes=1"},
		{name: "no key", line: "GPUCHECK =1"},
		{name: "key with a space", line: "GPUCHECK total bytes=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, v, ok := parseLine(tt.line)
			if diff := cmp.Diff([]any{tt.wantK, tt.wantV, tt.wantOK}, []any{k, v, ok}); diff != "" {
				t.Errorf("parseLine(%q) (-want,+got):\n%s", tt.line, diff)
			}
		})
	}
}

func TestParseReport(t *testing.T) {
	out := strings.Join([]string{
		"GPUCHECK runtime=torch-2.11.0+cu130",
		"[HAMI-core Warn(...)]: something",
		"GPUCHECK total_bytes=4294967296",
		"GPUCHECK free_bytes=3747610624",
		"GPUCHECK alloc_within_bytes=2576980377",
		"GPUCHECK alloc_within=ok",
		"GPUCHECK holding=1",
		"GPUCHECK alloc_past=oom",
		"GPUCHECK nvml_total_mib=4096",
		"GPUCHECK ready=1",
	}, "\n")
	got, err := parseReport(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := workloadReport{keyRuntime: "torch-2.11.0+cu130", keyTotal: "4294967296", keyFree: "3747610624", keyWithinBytes: "2576980377",
		keyWithin: resultOK, keyHolding: "1", keyPast: resultOOM, keyNVMLTotalMiB: "4096", keyReady: "1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want,+got):\n%s", diff)
	}
	if b, ok := got.bytes(keyTotal); !ok || b != 4<<30 {
		t.Errorf("bytes(total) = %d, %t", b, ok)
	}
	if _, ok := got.bytes(keyPast); ok {
		t.Errorf("bytes(alloc_past) reads %q as a number", got[keyPast])
	}
}

func TestWriteTable(t *testing.T) {
	tests := []struct {
		name   string
		checks []check
		want   string
	}{
		{name: "empty", want: "| check | expected | observed | result |\n|---|---|---|---|\n" + ""},
		{
			name: "pass, fail, escaping",
			checks: []check{
				{Name: "pod-a/main: total", Expected: "4096 MiB", Observed: "4096 MiB", Pass: true},
				{Name: "pod-b/main: past", Expected: "oom", Observed: "ok (a | b)\nsecond line", Pass: false},
				{Name: "blank", Expected: "", Observed: "  ", Pass: true},
			},
			want: "| check | expected | observed | result |\n|---|---|---|---|\n" +
				"| pod-a/main: total | 4096 MiB | 4096 MiB | PASS |\n" +
				"| pod-b/main: past | oom | ok (a \\| b) second line | FAIL |\n" +
				"| blank | - | - | PASS |\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &results{checks: tt.checks}
			var out bytes.Buffer
			if err := r.writeTable(&out); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("table (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	r := &results{}
	r.add("a", "x", "x", true)
	r.add("b", "x", "y", false)
	r.add("c", "x", "x", true)
	if got, want := r.summary(), "gpu-check: 2 passed, 1 failed"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
}

func TestContainerEnv(t *testing.T) {
	host := map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/root", "SECRET": "x"}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	tests := []struct {
		name    string
		envs    map[string]string
		passEnv []string
		want    []string
	}{
		{name: "Allocate's env plus PATH and HOME", envs: map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": "4096m", "NVIDIA_VISIBLE_DEVICES": "GPU-1"},
			passEnv: []string{"PATH", "HOME", "LD_LIBRARY_PATH"},
			want:    []string{"CUDA_DEVICE_MEMORY_LIMIT_0=4096m", "HOME=/root", "NVIDIA_VISIBLE_DEVICES=GPU-1", "PATH=/usr/bin:/bin"}},
		{name: "Allocate wins over the host", envs: map[string]string{"HOME": "/home/c"}, passEnv: []string{"HOME"}, want: []string{"HOME=/home/c"}},
		{name: "nothing else of the host", envs: map[string]string{}, passEnv: nil, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, containerEnv(tt.envs, tt.passEnv, lookup)); diff != "" {
				t.Errorf("env (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseParent(t *testing.T) {
	tests := []struct {
		name, stat string
		want       uint32
		wantErr    bool
	}{
		{name: "plain", stat: "4242 (python3) S 4240 4242 1 0 -1 4194560", want: 4240},
		{name: "comm with spaces and parentheses", stat: "7 (a) b (c)) R 1 7 7 0", want: 1},
		{name: "truncated", stat: "7 (a) R", wantErr: true},
		{name: "no comm", stat: "garbage", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseParent(tt.stat)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseParent(%q) = %d, %v; want %d (error %t)", tt.stat, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestPIDOwnersWalksUp(t *testing.T) {
	proc := t.TempDir()
	for pid, stat := range map[string]string{"30": "30 (nvidia-smi) S 20 1", "20": "20 (python3) S 10 1", "10": "10 (sh) S 1 1"} {
		if err := os.MkdirAll(proc+"/"+pid, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(proc+"/"+pid+"/stat", []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := newPIDOwners(proc)
	o.add(20, ownerOf("uid-a", "c1"))
	tests := []struct {
		name    string
		pid     uint32
		wantErr bool
	}{
		{name: "the started process", pid: 20},
		{name: "its child", pid: 30},
		{name: "its parent is not in the container", pid: 10, wantErr: true},
		{name: "unknown", pid: 99, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := o.OwnerOf(tt.pid)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("OwnerOf(%d) = %+v, want an error", tt.pid, got)
				}
				return
			}
			if err != nil || got != ownerOf("uid-a", "c1") {
				t.Fatalf("OwnerOf(%d) = %+v, %v", tt.pid, got, err)
			}
		})
	}
}

func TestPrepareWorkload(t *testing.T) {
	found := func(names ...string) func(string) (string, error) {
		return func(n string) (string, error) {
			for _, f := range names {
				if f == n {
					return "/usr/bin/" + n, nil
				}
			}
			return "", errors.New("not found")
		}
	}
	ok := func(out string) func(context.Context, string, ...string) ([]byte, error) {
		return func(context.Context, string, ...string) ([]byte, error) { return []byte(out), nil }
	}
	noTorch := func(_ context.Context, name string, _ ...string) ([]byte, error) {
		if strings.HasSuffix(name, "python3") {
			return []byte("ModuleNotFoundError: No module named 'torch'\n"), errors.New("exit status 1")
		}
		return nil, nil
	}
	tests := []struct {
		name     string
		kind     string
		tb       toolbox
		wantKind string
		wantArg0 string
		wantErr  error
	}{
		{name: "torch, by the interpreter python3 resolves to", kind: workloadAuto, tb: toolbox{lookPath: found("python3", "nvcc"), output: ok("/opt/venv/bin/python3.12\n")},
			wantKind: workloadTorch, wantArg0: "/opt/venv/bin/python3.12"},
		{name: "no torch: nvcc", kind: workloadAuto, tb: toolbox{lookPath: found("python3", "nvcc"), output: noTorch}, wantKind: workloadCUDA},
		{name: "cuda asked", kind: workloadCUDA, tb: toolbox{lookPath: found("python3", "nvcc"), output: ok("")}, wantKind: workloadCUDA},
		{name: "neither", kind: workloadAuto, tb: toolbox{lookPath: found(), output: ok("")}, wantErr: errNoWorkload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := prepareWorkload(context.Background(), tt.tb, tt.kind, dir)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("prepareWorkload = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || w.kind != tt.wantKind {
				t.Fatalf("prepareWorkload = %+v, %v; want %s", w, err, tt.wantKind)
			}
			if tt.wantArg0 != "" && w.argv[0] != tt.wantArg0 {
				t.Errorf("argv %q, want %s first", w.argv, tt.wantArg0)
			}
			if got := w.command(modeLimits); got[len(got)-1] != modeLimits {
				t.Errorf("command %q does not end with the mode", got)
			}
		})
	}
}
