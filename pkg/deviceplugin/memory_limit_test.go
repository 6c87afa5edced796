package deviceplugin

import (
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// hostMachine is the ELF machine of this test's architecture.
func hostMachine(t *testing.T) elf.Machine {
	t.Helper()
	m, ok := HostELFMachine()
	if !ok {
		t.Skipf("no ELF machine known for %s", runtime.GOARCH)
	}
	return m
}

// writeELF writes an ELF header of the given type and machine (fake.WriteELF).
func writeELF(t *testing.T, path string, typ elf.Type, machine elf.Machine) {
	t.Helper()
	if err := fake.WriteELF(path, typ, machine); err != nil {
		t.Fatal(err)
	}
}

// limitConfig is HAMi-core mode with a valid library under dir.
func limitConfig(t *testing.T, dir string) MemoryLimitConfig {
	t.Helper()
	lib := filepath.Join(dir, "lib", "libvgpu.so")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	writeELF(t, lib, elf.ET_DYN, hostMachine(t))
	return MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: lib, StateDir: filepath.Join(dir, "state"), CollectAfter: DefaultCollectAfter}
}

func TestMemoryLimitConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     MemoryLimitConfig
		wantErr string
	}{
		{name: "none", cfg: DefaultMemoryLimitConfig()},
		{name: "hami-core with the default paths", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: DefaultHAMiCoreLibrary, StateDir: DefaultMemoryLimitState}},
		{name: "unknown mode", cfg: MemoryLimitConfig{Mode: "mps"}, wantErr: `memory limit mode "mps"`},
		{name: "library path not absolute", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: "lib/libvgpu.so", StateDir: "/s"}, wantErr: "absolute, clean path"},
		{name: "library path not clean", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: "/a/../libvgpu.so", StateDir: "/s"}, wantErr: "absolute, clean path"},
		{name: "empty library", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, StateDir: "/s"}, wantErr: "absolute, clean path"},
		{name: "state folder not absolute", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: "/l.so", StateDir: "state"}, wantErr: "absolute, clean path"},
		{name: "install source not absolute", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: "/l.so", StateDir: "/s", InstallFrom: "l.so"}, wantErr: "must be an absolute path"},
		{name: "library where the counters go", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: ContainerCacheDir + "/l.so", StateDir: "/s"}, wantErr: "collides"},
		{name: "counter folders bounded", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: "/l.so", StateDir: "/s", CounterSize: DefaultCounterSize}},
		{name: "counter folders at the smallest bound", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: "/l.so", StateDir: "/s", CounterSize: MinCounterSize}},
		{name: "counter folders smaller than HAMi-core's file", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: "/l.so", StateDir: "/s", CounterSize: 64 << 10}, wantErr: "counter size 65536 bytes"},
		{name: "negative counter size", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: "/l.so", StateDir: "/s", CounterSize: -1}, wantErr: "counter size -1 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	// New refuses it too: a relative path would be resolved in each container's own root.
	logger, _ := ktesting.NewTestContext(t)
	h, err := mockhost.New("dgxa100", mockhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(nvml.New(h), k8sfake.NewClientset(), WithNodeName(testNode), WithLogger(logger), WithMemoryLimit(MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: "libvgpu.so", StateDir: "/s"}))
	if err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("New with a relative library = %v, want an error", err)
	}
}

func TestAllocateMemoryLimits(t *testing.T) {
	host := mockhost.Options{MemoryBytes: 12 << 30} // 12,288 units of 1Mi: within kubelet's limit
	tests := []struct {
		name string
		unit string
		pod  *v1.Pod
		// want: container name → the env HAMi-core reads (limits and cap)
		want map[string]map[string]string
	}{
		{
			name: "one card, GiB units",
			unit: "1Gi",
			pod:  st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {3: 4}}).Obj(),
			want: map[string]map[string]string{"c": {"CUDA_DEVICE_MEMORY_LIMIT_0": "4096m"}},
		},
		{
			name: "two cards: one limit each, in NVIDIA_VISIBLE_DEVICES order",
			unit: "1Gi",
			pod: st.MakePod().Name("p").Node(testNode).Annotation(contract.DefaultGPUsPerContainer, "2").NamedGPUMem("c", 10).
				Allocation(contract.Allocation{"0": {6: 5, 1: 5}}).Obj(),
			want: map[string]map[string]string{"c": {"CUDA_DEVICE_MEMORY_LIMIT_0": "5120m", "CUDA_DEVICE_MEMORY_LIMIT_1": "5120m"}},
		},
		{
			name: "several containers, init included, each its own limit",
			unit: "1Gi",
			pod: st.MakePod().Name("p").Node(testNode).NamedInitGPUMem("i", 6).NamedGPUMem("a", 2).NamedGPUMem("none", 0).NamedGPUMem("b", 3).
				Allocation(contract.Allocation{"init-0": {4: 6}, "0": {4: 2}, "2": {6: 3}}).Obj(),
			want: map[string]map[string]string{
				"i": {"CUDA_DEVICE_MEMORY_LIMIT_0": "6144m"},
				"a": {"CUDA_DEVICE_MEMORY_LIMIT_0": "2048m"},
				"b": {"CUDA_DEVICE_MEMORY_LIMIT_0": "3072m"},
			},
		},
		{
			name: "MiB units",
			unit: "1Mi",
			pod:  st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 1500).Allocation(contract.Allocation{"0": {0: 1500}}).Obj(),
			want: map[string]map[string]string{"c": {"CUDA_DEVICE_MEMORY_LIMIT_0": "1500m"}},
		},
		{
			name: "256Mi units",
			unit: "256Mi",
			pod:  st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 3).Allocation(contract.Allocation{"0": {2: 3}}).Obj(),
			want: map[string]map[string]string{"c": {"CUDA_DEVICE_MEMORY_LIMIT_0": "768m"}},
		},
		{
			name: "3Gi units over two cards",
			unit: "3Gi",
			pod: st.MakePod().Name("p").Node(testNode).Annotation(contract.DefaultGPUsPerContainer, "2").NamedGPUMem("c", 4).
				Allocation(contract.Allocation{"0": {0: 2, 7: 2}}).Obj(),
			want: map[string]map[string]string{"c": {"CUDA_DEVICE_MEMORY_LIMIT_0": "6144m", "CUDA_DEVICE_MEMORY_LIMIT_1": "6144m"}},
		},
		{
			name: "compute cap",
			unit: "1Gi",
			pod: st.MakePod().Name("p").Node(testNode).Annotation(contract.DefaultCoreKey, "30").NamedGPUMem("c", 4).
				Allocation(contract.Allocation{"0": {3: 4}}).Obj(),
			want: map[string]map[string]string{"c": {"CUDA_DEVICE_MEMORY_LIMIT_0": "4096m", "CUDA_DEVICE_SM_LIMIT": "30"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := limitConfig(t, t.TempDir())
			names := contract.DefaultNames()
			names.Unit = resource.MustParse(tt.unit)
			h := newHarnessWith(t, listBeforeAdmit, host, []Option{WithMemoryLimit(cfg), WithNames(names)}, tt.pod)
			if mode, reason := h.p.MemoryLimit(); mode != MemoryLimitHAMiCore {
				t.Fatalf("MemoryLimit() = %s (%s), want %s", mode, reason, MemoryLimitHAMiCore)
			}
			h.admit(tt.pod)
			if len(h.responses) != len(tt.want) {
				t.Fatalf("%d containers allocated, want %d", len(h.responses), len(tt.want))
			}
			preload, err := os.ReadFile(filepath.Join(cfg.StateDir, preloadFile))
			if err != nil || string(preload) != cfg.Library+"\n" {
				t.Fatalf("preload file = %q, %v; want the library's path", preload, err)
			}
			if override, err := os.ReadFile(filepath.Join(cfg.StateDir, "override-env")); err != nil || len(override) != 0 {
				t.Fatalf("override file = %q, %v; want an empty file", override, err)
			}
			for name, want := range tt.want {
				resp := h.responses[name]
				got := map[string]string{}
				for k, v := range resp.Envs {
					if strings.HasPrefix(k, EnvMemoryLimit) || k == EnvSMLimit {
						got[k] = v
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("container %s: limits (-want,+got):\n%s", name, diff)
				}
				if cache := resp.Envs[EnvSharedCache]; !strings.HasPrefix(cache, ContainerCacheDir+"/vgpu-") || !strings.HasSuffix(cache, ".cache") ||
					resp.Envs[EnvDeviceOrder] != "PCI_BUS_ID" {
					t.Errorf("container %s: %s=%q %s=%q", name, EnvSharedCache, resp.Envs[EnvSharedCache], EnvDeviceOrder, resp.Envs[EnvDeviceOrder])
				}
				if n := strings.Count(resp.Envs[contract.EnvVisibleDevices], ",") + 1; n != len(want)-btoi(want[EnvSMLimit] != "") {
					t.Errorf("container %s sees %d cards and has %d limits", name, n, len(want))
				}
				counters := filepath.Join(cfg.StateDir, podsDir, "uid-p", name)
				wantMounts := []*pluginapi.Mount{
					{ContainerPath: cfg.Library, HostPath: cfg.Library, ReadOnly: true},
					{ContainerPath: "/etc/ld.so.preload", HostPath: filepath.Join(cfg.StateDir, "ld.so.preload"), ReadOnly: true},
					{ContainerPath: "/overrideEnv", HostPath: filepath.Join(cfg.StateDir, "override-env"), ReadOnly: true},
					{ContainerPath: ContainerCacheDir, HostPath: counters},
				}
				if diff := cmp.Diff(wantMounts, resp.Mounts, cmp.Comparer(func(a, b *pluginapi.Mount) bool {
					return a.ContainerPath == b.ContainerPath && a.HostPath == b.HostPath && a.ReadOnly == b.ReadOnly
				})); diff != "" {
					t.Errorf("container %s: mounts (-want,+got):\n%s", name, diff)
				}
				if st, err := os.Stat(counters); err != nil || !st.IsDir() || st.Mode().Perm() != 0o777 {
					t.Errorf("container %s: counter folder %s: %v (want a folder any container user may write)", name, counters, err)
				}
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestAllocateWithoutMemoryLimits(t *testing.T) {
	pod := st.MakePod().Name("p").Node(testNode).Annotation(contract.DefaultCoreKey, "30").NamedGPUMem("c", 4).
		Allocation(contract.Allocation{"0": {3: 4}}).Obj()
	h := newHarness(t, listBeforeAdmit, mockhost.Options{MemoryBytes: 40 << 30}, pod)
	h.admit(pod)
	resp := h.responses["c"]
	if len(resp.Mounts) != 0 {
		t.Errorf("mode none mounts %v", resp.Mounts)
	}
	for k := range resp.Envs {
		if strings.HasPrefix(k, "CUDA_") {
			t.Errorf("mode none sets %s", k)
		}
	}
}

func TestMemoryLimitUnavailable(t *testing.T) {
	tests := []struct {
		name    string
		library func(t *testing.T, path string)
		wantWhy string
	}{
		{name: "missing library", library: func(*testing.T, string) {}, wantWhy: "no such file"},
		{name: "not an ELF file", library: func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, wantWhy: "not an ELF shared object"},
		{name: "an executable, not a shared object", library: func(t *testing.T, path string) {
			writeELF(t, path, elf.ET_EXEC, hostMachine(t))
		}, wantWhy: "not a shared object"},
		{name: "another architecture", library: func(t *testing.T, path string) {
			other := elf.EM_AARCH64
			if hostMachine(t) == elf.EM_AARCH64 {
				other = elf.EM_X86_64
			}
			writeELF(t, path, elf.ET_DYN, other)
		}, wantWhy: "built for"},
		{name: "a folder", library: func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, wantWhy: "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: filepath.Join(dir, "libvgpu.so"), StateDir: filepath.Join(dir, "state")}
			tt.library(t, cfg.Library)
			pod := st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {3: 4}}).Obj()
			h := newHarnessWith(t, listBeforeAdmit, mockhost.Options{MemoryBytes: 40 << 30}, []Option{WithMemoryLimit(cfg)}, pod)
			mode, reason := h.p.MemoryLimit()
			if mode != contract.MemoryLimitUnavailable || !strings.Contains(reason, tt.wantWhy) {
				t.Fatalf("MemoryLimit() = %s, %q; want %s because %q", mode, reason, contract.MemoryLimitUnavailable, tt.wantWhy)
			}
			h.admit(pod)
			if resp := h.responses["c"]; len(resp.Mounts) != 0 || resp.Envs[EnvMemoryLimit+"_0"] != "" {
				t.Errorf("unavailable mode handed out mounts %v, env %v", resp.Mounts, resp.Envs)
			}
			// the node says so, for the extender's inspect and operators
			if err := h.p.publishNode(h.ctx); err != nil {
				t.Fatal(err)
			}
			node, err := h.client.CoreV1().Nodes().Get(h.ctx, testNode, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gpus, err := contract.DecodeGPUs(node.Annotations[contract.DefaultNodeGPUsKey])
			if err != nil || len(gpus) == 0 {
				t.Fatalf("node annotation: %v", err)
			}
			for _, g := range gpus {
				if g.MemoryLimit != contract.MemoryLimitUnavailable {
					t.Errorf("GPU %d memoryLimit %q, want %q", g.Index, g.MemoryLimit, contract.MemoryLimitUnavailable)
				}
			}
			// and the pod is told it runs without a limit
			waitForEvent(t, h, ReasonMemoryLimitUnavailable)
		})
	}
}

// waitForEvent waits for an event with reason on the harness's clientset (warnPod records
// them asynchronously).
func waitForEvent(t *testing.T, h *harness, reason string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		evs, err := h.client.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == reason {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s event", reason)
}

func TestMemoryLimitInstallsLibrary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "image", "libvgpu.so")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	writeELF(t, src, elf.ET_DYN, hostMachine(t))
	cfg := MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: filepath.Join(dir, "host", "lib", "libvgpu.so"),
		InstallFrom: src, StateDir: filepath.Join(dir, "state")}
	_, ctx := ktesting.NewTestContext(t)
	if l := newLimiter(ctx, cfg, &fakeMounter{}); !l.enforced() {
		t.Fatalf("limiter not enforced: %s", l.reason)
	}
	want, _ := os.ReadFile(src)
	got, err := os.ReadFile(cfg.Library)
	if err != nil || string(got) != string(want) {
		t.Fatalf("installed library: %v (%d bytes, want %d)", err, len(got), len(want))
	}
	// a second start with the same library leaves the file (and so running containers' mounts) alone
	before, _ := os.Stat(cfg.Library)
	if l := newLimiter(ctx, cfg, &fakeMounter{}); !l.enforced() {
		t.Fatalf("second start not enforced: %s", l.reason)
	}
	after, _ := os.Stat(cfg.Library)
	if !os.SameFile(before, after) {
		t.Error("the same library was written again")
	}
	// a broken image copy leaves the node visibly without limits
	if err := os.WriteFile(src, []byte("truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l := newLimiter(ctx, cfg, &fakeMounter{}); l.enforced() || l.mode != contract.MemoryLimitUnavailable {
		t.Errorf("a broken library from the image gave mode %s", l.mode)
	}
}

func TestMemoryLimitCollectsGonePods(t *testing.T) {
	cfg := limitConfig(t, t.TempDir())
	_, ctx := ktesting.NewTestContext(t)
	l := newLimiter(ctx, cfg, &fakeMounter{})
	live := st.MakePod().Name("live").Obj()
	for _, uid := range []string{"uid-live", "uid-gone", "uid-young"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, podsDir, uid, "c"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	old := now.Add(-2 * DefaultCollectAfter)
	for _, uid := range []string{"uid-live", "uid-gone"} {
		if err := os.Chtimes(filepath.Join(cfg.StateDir, podsDir, uid), old, old); err != nil {
			t.Fatal(err)
		}
	}
	l.collect(ctx, []*v1.Pod{live}, now)
	for uid, want := range map[string]bool{"uid-live": true, "uid-gone": false, "uid-young": true} {
		_, err := os.Stat(filepath.Join(cfg.StateDir, podsDir, uid))
		if got := err == nil; got != want {
			t.Errorf("folder of %s exists = %v, want %v", uid, got, want)
		}
	}
}

func TestContainerDirRefusesPathTricks(t *testing.T) {
	l := &limiter{cfg: MemoryLimitConfig{StateDir: "/s"}}
	for _, tc := range []struct{ uid, name string }{{"..", "c"}, {"a/b", "c"}, {"u", "../x"}, {"", "c"}, {"u", ""}} {
		if dir, err := l.containerDir(types.UID(tc.uid), tc.name); err == nil {
			t.Errorf("containerDir(%q, %q) = %s, want an error", tc.uid, tc.name, dir)
		}
	}
}
