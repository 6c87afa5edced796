package enforce

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/enforce/fake"
)

func TestPrepare(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		// want: the env HAMi-core reads for limits and the cap
		want map[string]string
	}{
		{name: "one card", req: Request{CardBytes: []int64{4 << 30}}, want: map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": "4096m"}},
		{name: "two cards: one limit each, in order", req: Request{CardBytes: []int64{5 << 30, 768 << 20}},
			want: map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": "5120m", "CUDA_DEVICE_MEMORY_LIMIT_1": "768m"}},
		{name: "MiB", req: Request{CardBytes: []int64{1500 << 20}}, want: map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": "1500m"}},
		{name: "compute cap", req: Request{CardBytes: []int64{4 << 30}, CorePercent: 30},
			want: map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": "4096m", "CUDA_DEVICE_SM_LIMIT": "30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := limitConfig(t, t.TempDir())
			cfg.CounterSize = DefaultCounterSize
			m := &fake.Mounter{}
			b := newHAMiCore(t, cfg, m)
			if mode, _ := b.Mode(); mode != ModeHAMiCore {
				t.Fatalf("Mode() = %s, want %s", mode, ModeHAMiCore)
			}
			tt.req.PodUID, tt.req.Container, tt.req.Pod = "uid-p", "c", "default/p"
			edits, err := b.Prepare(tt.req)
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if preload, err := os.ReadFile(cfg.PreloadHostPath()); err != nil || string(preload) != cfg.Library+"\n" {
				t.Fatalf("preload file = %q, %v; want the library's path", preload, err)
			}
			if override, err := os.ReadFile(filepath.Join(cfg.StateDir, "override-env")); err != nil || len(override) != 0 {
				t.Fatalf("override file = %q, %v; want an empty file", override, err)
			}
			got := map[string]string{}
			for k, v := range edits.Env {
				if strings.HasPrefix(k, EnvMemoryLimit) || k == EnvSMLimit {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("limits (-want,+got):\n%s", diff)
			}
			if cache := edits.Env[EnvSharedCache]; !strings.HasPrefix(cache, ContainerCacheDir+"/vgpu-") || !strings.HasSuffix(cache, ".cache") ||
				edits.Env[EnvDeviceOrder] != "PCI_BUS_ID" {
				t.Errorf("%s=%q %s=%q", EnvSharedCache, cache, EnvDeviceOrder, edits.Env[EnvDeviceOrder])
			}
			counters := filepath.Join(cfg.StateDir, "pods", "uid-p", "c")
			wantMounts := []Mount{
				{ContainerPath: cfg.Library, HostPath: cfg.Library, ReadOnly: true},
				{ContainerPath: "/etc/ld.so.preload", HostPath: filepath.Join(cfg.StateDir, "ld.so.preload"), ReadOnly: true},
				{ContainerPath: "/overrideEnv", HostPath: filepath.Join(cfg.StateDir, "override-env"), ReadOnly: true},
				{ContainerPath: ContainerCacheDir, HostPath: counters},
			}
			if diff := cmp.Diff(wantMounts, edits.Mounts); diff != "" {
				t.Errorf("mounts (-want,+got):\n%s", diff)
			}
			if st, err := os.Stat(counters); err != nil || !st.IsDir() || st.Mode().Perm() != 0o777 {
				t.Errorf("counter folder %s: %v (want a folder any container user may write)", counters, err)
			}
			if diff := cmp.Diff(map[string]int64{counters: DefaultCounterSize}, m.Mounted); diff != "" {
				t.Errorf("counter folders mounted (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestNewBackendModes(t *testing.T) {
	tests := []struct {
		name       string
		mode       string
		library    func(t *testing.T, path string)
		wantMode   string
		wantReason string
	}{
		{name: "none", mode: ModeNone, library: func(*testing.T, string) {}, wantMode: ModeNone},
		{name: "hami-core", mode: ModeHAMiCore, library: func(t *testing.T, path string) {
			writeELF(t, path, elf.ET_DYN, hostMachine(t))
		}, wantMode: ModeHAMiCore},
		{name: "missing library", mode: ModeHAMiCore, library: func(*testing.T, string) {}, wantMode: ModeUnavailable, wantReason: "no such file"},
		{name: "not an ELF file", mode: ModeHAMiCore, library: func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, wantMode: ModeUnavailable, wantReason: "not an ELF shared object"},
		{name: "an executable, not a shared object", mode: ModeHAMiCore, library: func(t *testing.T, path string) {
			writeELF(t, path, elf.ET_EXEC, hostMachine(t))
		}, wantMode: ModeUnavailable, wantReason: "not a shared object"},
		{name: "another architecture", mode: ModeHAMiCore, library: func(t *testing.T, path string) {
			other := elf.EM_AARCH64
			if hostMachine(t) == elf.EM_AARCH64 {
				other = elf.EM_X86_64
			}
			writeELF(t, path, elf.ET_DYN, other)
		}, wantMode: ModeUnavailable, wantReason: "built for"},
		{name: "a folder", mode: ModeHAMiCore, library: func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, wantMode: ModeUnavailable, wantReason: "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Mode: tt.mode, Library: filepath.Join(dir, "libvgpu.so"), StateDir: filepath.Join(dir, "state")}
			tt.library(t, cfg.Library)
			b := NewBackend(t.Context(), cfg, WithMounter(&fake.Mounter{}))
			mode, reason := b.Mode()
			if mode != tt.wantMode || (tt.wantReason == "") != (reason == "") || !strings.Contains(reason, tt.wantReason) {
				t.Fatalf("Mode() = %s, %q; want %s because %q", mode, reason, tt.wantMode, tt.wantReason)
			}
			if mode == ModeHAMiCore {
				return
			}
			edits, err := b.Prepare(Request{PodUID: "uid-p", Container: "c", CardBytes: []int64{4 << 30}})
			if err != nil || !cmp.Equal(Edits{}, edits, cmpopts.EquateEmpty()) {
				t.Errorf("mode %s: Prepare = %+v, %v; want nothing", mode, edits, err)
			}
			b.Collect(t.Context(), nil, time.Now())
		})
	}
}

func TestInstallsLibrary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "image", "libvgpu.so")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	writeELF(t, src, elf.ET_DYN, hostMachine(t))
	cfg := Config{Mode: ModeHAMiCore, Library: filepath.Join(dir, "host", "lib", "libvgpu.so"),
		InstallFrom: src, StateDir: filepath.Join(dir, "state")}
	newHAMiCore(t, cfg, &fake.Mounter{})
	want, _ := os.ReadFile(src)
	got, err := os.ReadFile(cfg.Library)
	if err != nil || string(got) != string(want) {
		t.Fatalf("installed library: %v (%d bytes, want %d)", err, len(got), len(want))
	}
	// a second start with the same library leaves the file (and so running containers' mounts) alone
	before, _ := os.Stat(cfg.Library)
	newHAMiCore(t, cfg, &fake.Mounter{})
	after, _ := os.Stat(cfg.Library)
	if !os.SameFile(before, after) {
		t.Error("the same library was written again")
	}
	// a broken image copy leaves the node visibly without limits
	if err := os.WriteFile(src, []byte("truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	if mode, _ := NewBackend(t.Context(), cfg, WithMounter(&fake.Mounter{})).Mode(); mode != ModeUnavailable {
		t.Errorf("a broken library from the image gave mode %s", mode)
	}
}

func TestContainerDirRefusesPathTricks(t *testing.T) {
	h := &hamiCore{cfg: Config{StateDir: "/s"}, mounter: &fake.Mounter{}}
	for _, tc := range []struct{ uid, name string }{{"..", "c"}, {"a/b", "c"}, {"u", "../x"}, {"", "c"}, {"u", ""}} {
		if dir, err := h.containerDir(types.UID(tc.uid), tc.name); err == nil {
			t.Errorf("containerDir(%q, %q) = %s, want an error", tc.uid, tc.name, dir)
		}
		if _, err := h.Prepare(Request{PodUID: types.UID(tc.uid), Container: tc.name}); err == nil {
			t.Errorf("Prepare(%q, %q) succeeded, want an error", tc.uid, tc.name)
		}
	}
}
