package deviceplugin

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
	"github.com/gpushare/gpushare/pkg/enforce"
	"github.com/gpushare/gpushare/pkg/enforce/fake"
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

// TestMemoryLimitConfigValidate: the plugin wraps enforce.Config.Validate's errors (tested
// there) in ErrInvalidConfig, and New refuses such a configuration.
func TestMemoryLimitConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     MemoryLimitConfig
		wantErr string
	}{
		{name: "none", cfg: DefaultMemoryLimitConfig()},
		{name: "hami-core with the default paths", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: DefaultHAMiCoreLibrary, StateDir: DefaultMemoryLimitState}},
		{name: "unknown mode", cfg: MemoryLimitConfig{Mode: "mps"}, wantErr: `invalid device plugin configuration: memory limit mode "mps"`},
		{name: "library where the counters go", cfg: MemoryLimitConfig{Mode: MemoryLimitHAMiCore, Library: ContainerCacheDir + "/l.so", StateDir: "/s"}, wantErr: "collides"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateMemoryLimit(tt.cfg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateMemoryLimit: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ValidateMemoryLimit = %v, want an ErrInvalidConfig containing %q", err, tt.wantErr)
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
			preload, err := os.ReadFile(filepath.Join(cfg.StateDir, "ld.so.preload"))
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
				counters := filepath.Join(cfg.StateDir, "pods", "uid-p", name)
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

// TestMemoryLimitCollectsGonePods: the reconciler's pass hands the backend the UIDs of the pods
// it listed, whose counter folders stay; the others go once old enough.
func TestMemoryLimitCollectsGonePods(t *testing.T) {
	cfg := limitConfig(t, t.TempDir())
	live := st.MakePod().Name("live").Obj()
	h := newHarnessWith(t, listBeforeAdmit, mockhost.Options{MemoryBytes: 40 << 30}, []Option{WithMemoryLimit(cfg)}, live)
	for _, uid := range []string{"uid-live", "uid-gone"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, "pods", uid, "c"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.p.collectLimits(h.ctx, []*v1.Pod{live}, time.Now().Add(2*DefaultCollectAfter))
	for uid, want := range map[string]bool{"uid-live": true, "uid-gone": false} {
		_, err := os.Stat(filepath.Join(cfg.StateDir, "pods", uid))
		if got := err == nil; got != want {
			t.Errorf("folder of %s exists = %v, want %v", uid, got, want)
		}
	}
}

// TestAllocateBoundsCounterFolder: under HAMi-core each container's counter folder gets a
// tmpfs of --hami-core-counter-size before Allocate hands it out; 0 leaves a plain folder; a
// mount that fails fails that container's Allocate (FailedPrecondition, a Warning Event), saying
// how to fix the node, rather than handing out an unbounded host folder.
func TestAllocateBoundsCounterFolder(t *testing.T) {
	tests := []struct {
		name        string
		size        int64
		failMount   error
		wantMounted map[string]int64 // counter folder (under StateDir) → size
		wantErr     string
	}{
		{name: "default size", size: DefaultCounterSize, wantMounted: map[string]int64{"pods/uid-p/i": DefaultCounterSize, "pods/uid-p/c": DefaultCounterSize}},
		{name: "larger size", size: 16 << 20, wantMounted: map[string]int64{"pods/uid-p/i": 16 << 20, "pods/uid-p/c": 16 << 20}},
		{name: "0: plain folders", size: 0, wantMounted: map[string]int64{}},
		{name: "mount refused", size: DefaultCounterSize, failMount: fmt.Errorf("%w: mount: %w", enforce.ErrCounterMount, unix.EPERM),
			wantMounted: map[string]int64{}, wantErr: "--hami-core-counter-size=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := limitConfig(t, t.TempDir())
			cfg.CounterSize = tt.size
			m := &fake.Mounter{FailMount: tt.failMount}
			pod := st.MakePod().Name("p").Node(testNode).NamedInitGPUMem("i", 2).NamedGPUMem("c", 4).
				Allocation(contract.Allocation{"init-0": {1: 2}, "0": {3: 4}}).Obj()
			h := newHarnessWith(t, listBeforeAdmit, mockhost.Options{MemoryBytes: 40 << 30},
				[]Option{WithMemoryLimit(cfg), withCounterMounter(m)}, pod)
			h.kubelet.AddPod(pod)
			resp, err := h.allocate(h.preferred(2))
			if tt.wantErr != "" {
				if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `container i`) {
					t.Fatalf("Allocate = %v, %v; want FailedPrecondition naming container i and saying %q", resp, err, tt.wantErr)
				}
				if msg := eventMessage(t, h, reasonAllocateFailed); !strings.Contains(msg, tt.wantErr) {
					t.Errorf("event %q does not say %q", msg, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("Allocate for the init container: %v", err)
				}
				if _, err := h.allocate(h.preferred(4)); err != nil {
					t.Fatalf("Allocate for the app container: %v", err)
				}
			}
			got := map[string]int64{}
			for dir, size := range m.Mounted {
				rel, _ := filepath.Rel(cfg.StateDir, dir)
				got[rel] = size
			}
			if diff := cmp.Diff(tt.wantMounted, got); diff != "" {
				t.Errorf("counter folders mounted (-want,+got):\n%s", diff)
			}
		})
	}
}
