package main

import (
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
	"github.com/gpushare/gpushare/pkg/enforce/fake"
)

// ownerOf is the owner the check records for a container.
func ownerOf(podUID, containerID string) usage.Owner {
	return usage.Owner{PodUID: podUID, ContainerID: containerID}
}

// needNamespaces skips the test where this process cannot make mount namespaces.
func needNamespaces(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: the launcher needs mount namespaces and bind mounts (run the tests as root to cover it)")
	}
	if err := probeMountNamespace(context.Background()); err != nil {
		t.Skipf("no mount namespaces here: %v", err)
	}
}

// writeELF writes a 64-bit ELF header of a shared object for this machine: all the plugin
// reads of the library (the loader refuses it, and says so on stderr, which is harmless).
func writeELF(t *testing.T, path string) {
	t.Helper()
	machine, ok := deviceplugin.HostELFMachine()
	if !ok {
		t.Skipf("no ELF machine known for %s", runtime.GOARCH)
	}
	if err := fake.WriteELF(path, elf.ET_DYN, machine); err != nil {
		t.Fatal(err)
	}
}

// hostState is what the host has at the paths a container gets mounts at.
func hostState(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{deviceplugin.ContainerPreloadPath, deviceplugin.ContainerOverridePath, deviceplugin.ContainerCacheDir} {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			out[p] = "absent"
		case st.IsDir():
			out[p] = "folder"
		default:
			data, _ := os.ReadFile(p)
			out[p] = "file: " + string(data)
		}
	}
	return out
}

// mockRun is a checkRun on a mock one-GPU host with a dummy library, in a temporary folder.
func mockRun(t *testing.T) (*checkRun, *mockhost.Host) {
	t.Helper()
	h, err := mockhost.New("dgxa100", mockhost.Options{MemoryBytes: 16 << 30, ReservedBytes: 512 << 20, GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	nv := nvml.New(h)
	if err := nv.Init(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib", "libvgpu.so")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	writeELF(t, lib)
	opts := &options{library: lib, hamiCoreCommit: "test", passEnv: "PATH,HOME", unitsA: 4, unitsB: 2, timeout: time.Minute}
	card, err := nv.Device(checkCard)
	if err != nil {
		t.Fatal(err)
	}
	return &checkRun{opts: opts, nv: nv, dir: dir, card: card}, h
}

// launchScript runs in the container: what it sees at the mounts, then its whole env.
const launchScript = `echo "preload=$(cat /etc/ld.so.preload)"
if (echo x >> /etc/ld.so.preload) 2>/dev/null; then echo preload=writable; else echo preload=read-only; fi
if [ -r "$1" ]; then echo library=readable; fi
if (echo x >> /overrideEnv) 2>/dev/null; then echo override=writable; else echo override=read-only; fi
echo "override-size=$(wc -c < /overrideEnv)"
if touch /tmp/gpushare/counters; then echo cache=writable; fi
echo ENV
env`

func TestLaunchContainer(t *testing.T) {
	needNamespaces(t)
	_, ctx := ktesting.NewTestContext(t)
	r, _ := mockRun(t)
	before := hostState(t)
	node, err := newFakeNode(ctx, r.nv, r.opts.asks(), deviceplugin.WithMemoryLimit(deviceplugin.MemoryLimitConfig{
		Mode: deviceplugin.MemoryLimitHAMiCore, Library: r.opts.library, StateDir: filepath.Join(r.dir, "state")}))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := node.admitAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantLimits := map[string]string{"pod-a": "4096m", "pod-b": "2048m"}
	for _, a := range adm {
		t.Run(a.Pod.Name, func(t *testing.T) {
			env := containerEnv(a.Response.GetEnvs(), []string{"PATH", "HOME"}, osLookupEnv)
			spec := &containerSpec{Stage: filepath.Join(r.dir, "c-"+a.Pod.Name), Mounts: containerMounts(a.Response.GetMounts()),
				Argv: []string{"/bin/sh", "-c", launchScript, "sh", r.opts.library}, Env: env}
			cmd, err := containerCommand(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("container: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
			}
			checks, gotEnv, _ := strings.Cut(string(out), "ENV\n")
			wantChecks := "preload=" + r.opts.library + "\npreload=read-only\nlibrary=readable\noverride=read-only\noverride-size=0\ncache=writable\n"
			if diff := cmp.Diff(wantChecks, checks); diff != "" {
				t.Errorf("what the container sees (-want,+got):\n%s\nstderr:\n%s", diff, stderr.String())
			}
			if diff := cmp.Diff(env, shellEnv(gotEnv)); diff != "" {
				t.Errorf("container env (-want,+got):\n%s", diff)
			}
			if a.Response.GetEnvs()[deviceplugin.EnvMemoryLimit+"_0"] != wantLimits[a.Pod.Name] {
				t.Errorf("limit %q, want %s", a.Response.GetEnvs()[deviceplugin.EnvMemoryLimit+"_0"], wantLimits[a.Pod.Name])
			}
			counters := filepath.Join(r.dir, "state", "pods", string(a.Pod.UID), a.Container, "counters")
			if _, err := os.Stat(counters); err != nil {
				t.Errorf("the container's /tmp/gpushare is not its counter folder on the host: %v", err)
			}
		})
	}
	if diff := cmp.Diff(before, hostState(t)); diff != "" {
		t.Errorf("the host's files changed (-before,+after):\n%s", diff)
	}
}

// shellEnv is the env lines the shell printed, without what the shell adds itself.
func shellEnv(out string) []string {
	got := []string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, _, _ := strings.Cut(l, "=")
		if l == "" || k == "PWD" || k == "SHLVL" || k == "_" || k == "OLDPWD" {
			continue
		}
		got = append(got, l)
	}
	sort.Strings(got)
	return got
}

// fakeWorkload plays workload.py: it reads its limit from the env, and reports a GPU that
// holds the container to it, or, when broken, one that lets the past-limit allocation through;
// with short, a card that gives a whole-card container (over 4 GiB) only half its limit.
func fakeWorkload(broken, short bool) string {
	past, whole := "oom", "$((b - 536870912 - 16777216))"
	if broken {
		past = "ok"
	}
	if short {
		whole = "$((b / 2))"
	}
	return `set -e
if [ "$1" = maxalloc ]; then
	lim=${CUDA_DEVICE_MEMORY_LIMIT_0%m}
	b=$((lim * 1048576))
	echo "GPUCHECK runtime=fake"; echo "GPUCHECK total_bytes=$b"; echo "GPUCHECK free_bytes=$((b - 536870912))"
	echo "GPUCHECK holding=1"
	read -r go
	max=$((b - 536870912 - 16777216))
	if [ "$lim" -gt 4096 ]; then max=` + whole + `; fi
	echo "GPUCHECK max_alloc_bytes=$max"; echo "GPUCHECK ready=1"
	cat >/dev/null; exit 0
fi
if [ "$1" = context ]; then
	echo "GPUCHECK runtime=fake"; echo "GPUCHECK cuda_runtime=0.0"
	echo "GPUCHECK total_bytes=17179869184"; echo "GPUCHECK free_bytes=16642998272"; echo "GPUCHECK ready=1"
	cat >/dev/null; exit 0
fi
lim=${CUDA_DEVICE_MEMORY_LIMIT_0%m}
b=$((lim * 1048576))
echo "GPUCHECK runtime=fake"
echo "GPUCHECK total_bytes=$b"
echo "GPUCHECK free_bytes=$((b - 536870912))"
echo "GPUCHECK alloc_within_bytes=$((b * 6 / 10))"
echo "GPUCHECK alloc_within=ok"
echo "GPUCHECK holding=1"
read -r go
echo "GPUCHECK alloc_past_bytes=$((b * 3 / 2))"
echo "GPUCHECK alloc_past=` + past + `"
echo "GPUCHECK nvml_total_mib=$lim"
echo "GPUCHECK ready=1"
cat >/dev/null
`
}

func TestRunPodsWithAFakeWorkload(t *testing.T) {
	needNamespaces(t)
	tests := []struct {
		name          string
		broken, short bool
		wantFailed    []string
	}{
		{name: "held to their limits"},
		{name: "a limit not enforced", broken: true, wantFailed: []string{
			"pod-a/main: allocate 150% of the limit (6144 MiB) while the other container holds its memory",
			"pod-b/main: allocate 150% of the limit (3072 MiB) while the other container holds its memory",
		}},
		{name: "a card that does not give what it advertises", short: true, wantFailed: []string{
			"largest allocation under a limit of the whole card (15 GiB)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			r, h := mockRun(t)
			script := filepath.Join(r.dir, "workload.sh")
			if err := os.WriteFile(script, []byte(fakeWorkload(tt.broken, tt.short)), 0o644); err != nil {
				t.Fatal(err)
			}
			r.wl = workload{kind: "fake", argv: []string{"/bin/sh", script}}
			r.onRunning = func(procs []*process) { holdMemory(t, h, procs) }
			r.measureCards()
			r.measureContext(ctx)
			r.measureLimits(ctx)
			r.runPods(ctx)
			r.checkTopology(ctx, nil)
			r.addMachineNotes(versions{Driver: "test", CUDA: "test"})
			var out strings.Builder
			code := r.render(&out)
			t.Log("report:\n" + out.String())
			var failed []string
			for _, c := range r.res.checks {
				if !c.Pass {
					failed = append(failed, c.Name)
				}
			}
			if diff := cmp.Diff(tt.wantFailed, failed); diff != "" {
				t.Errorf("failed checks (-want,+got):\n%s\n%s", diff, out.String())
			}
			if wantCode := map[bool]int{true: 0, false: 1}[len(tt.wantFailed) == 0]; code != wantCode {
				t.Errorf("exit %d, want %d", code, wantCode)
			}
			for _, want := range []string{topoSkipNote, "CUDA context overhead: 300 MiB", "\ngpu-check: ",
				"| GPU 0 (Mock NVIDIA A100-SXM4-40GB): total (NVML) | 16384 MiB |",
				"| GPU 0 (Mock NVIDIA A100-SXM4-40GB): reserved by the driver (NVML) | 512 MiB |",
				"| GPU 0 (Mock NVIDIA A100-SXM4-40GB): usable (total - reserved) | 15872 MiB = 15 units of 1Gi |",
				"| largest allocation under a limit of the whole card (15 GiB) |",
				"| GPU 0 (Mock NVIDIA A100-SXM4-40GB): free at idle (NVML) | 15872 MiB |",
				"| CUDA context per process, without HAMi-core (NVML) | 300 MiB |",
				"| CUDA context per process, with HAMi-core (NVML) | 300 MiB |",
				"| CUDA context as HAMi-core counts it (limit - free inside the container) | 512 MiB |",
				"| largest allocation under a limit of 1 GiB | 496 MiB |",
				"| largest allocation under a limit of 4 GiB | 3568 MiB |",
				"| share-plugin advertises GPU 0's usable memory (total - driver's reserve) | 15 units | 15 units | PASS |",
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// holdMemory makes the mock card show each workload's process with what it holds plus a
// context of 300 MiB.
func holdMemory(t *testing.T, h *mockhost.Host, procs []*process) {
	t.Helper()
	var infos []gonvml.ProcessInfo
	for _, p := range procs {
		held, _ := p.snapshot().bytes(keyWithinBytes)
		infos = append(infos, gonvml.ProcessInfo{Pid: uint32(p.pid()), UsedGpuMemory: uint64(held) + 300<<20}) //nolint:gosec // G115: test sizes
	}
	h.SetUsage(checkCard, 50, infos)
}

// TestMakePodFollowsTheContract: the pods carry the extender's annotations.
func TestMakePodFollowsTheContract(t *testing.T) {
	names := contract.DefaultNames()
	pod, err := makePod(podAsk{Pod: "pod-a", Container: "main", Units: 4}, &names, 15, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		contract.AnnotationIndex: "0", contract.AnnotationPod: "4", contract.AnnotationDev: "15", contract.AnnotationAssigned: "false",
		contract.AnnotationAssumeTime: "0", contract.AnnotationAllocation: `{"0":{"0":4}}`,
	}
	if diff := cmp.Diff(want, pod.Annotations); diff != "" {
		t.Errorf("annotations (-want,+got):\n%s", diff)
	}
}
