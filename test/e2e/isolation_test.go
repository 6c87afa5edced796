package e2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// TestEnforceIsolationOnRealKubelet runs share-plugin with --memory-limit=hami-core on the real
// kubelet and containerd (mocked NVML, two 16 GiB cards) and looks from inside the containers at
// what the kubelet gave them from Allocate's answer: a pod asking 8 units over two cards
// (gpushare.io/gpu-count: "2") and a one-card pod with a compute cap each read their own
// /etc/ld.so.preload (read-only) naming the library, find the library readable at that path
// (the same bytes as the host's), see one limit per card they see (4096m on each of two cards;
// 3072m and CUDA_DEVICE_SM_LIMIT=30 on one), a writable counter folder, and an empty
// /overrideEnv. The node says hami-core in its inventory annotation and on the plugin's
// /metrics, with each container's limits. The invariant check ends it. HAMi-core itself needs
// a GPU: `make gpu-check` proves the limits hold there; here the library is a shared object
// built for the test.
func TestEnforceIsolationOnRealKubelet(t *testing.T) {
	dir := artifactDir(t)
	library := filepath.Join(dir, "hami-core", "libvgpu.so")
	stateDir := filepath.Join(dir, "hami-core-state")
	buildSharedObject(t, library)
	t.Cleanup(func() { framework.UnmountUnder(stateDir) }) // after the node stops: its pods' tmpfs counter folders
	e, gpus := startRealNodeWithPlugin(t, "--memory-limit=hami-core", "--hami-core-library="+library,
		"--hami-core-state-dir="+stateDir, "--hami-core-collect-after=2s")
	for _, g := range gpus {
		if g.MemoryLimit != contract.MemoryLimitHAMiCore {
			t.Errorf("GPU %d: memoryLimit %q in the node annotation, want %q", g.Index, g.MemoryLimit, contract.MemoryLimitHAMiCore)
		}
	}
	names := contract.DefaultNames()
	script := strings.Join([]string{
		"env | grep -E '^(NVIDIA_VISIBLE_DEVICES|CUDA_[A-Z_0-9]+)=' | sort",
		"echo PRELOAD=$(cat /etc/ld.so.preload)",
		"lib=$(cat /etc/ld.so.preload)",
		"echo LIBBYTES=$(wc -c < $lib)",
		"echo LIBMAGIC=$(head -c 4 $lib | tail -c 3)",
		"if echo x >> /etc/ld.so.preload 2>/dev/null; then echo PRELOAD_WRITABLE=yes; else echo PRELOAD_WRITABLE=no; fi",
		"if echo x >> $lib 2>/dev/null; then echo LIB_WRITABLE=yes; else echo LIB_WRITABLE=no; fi",
		"if touch /tmp/gpushare/probe; then echo COUNTERS_WRITABLE=yes; else echo COUNTERS_WRITABLE=no; fi",
		"echo OVERRIDE_BYTES=$(wc -c < /overrideEnv)",
		"sleep 3600",
	}, "; ")
	pods := map[string]struct {
		units int64
		ann   map[string]string
		want  map[string]string
	}{
		"two-cards": {8, map[string]string{names.GPUCountAnnotation: "2"},
			map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": "4096m", "CUDA_DEVICE_MEMORY_LIMIT_1": "4096m"}},
		"capped": {3, map[string]string{names.CoreAnnotation: "30"},
			map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": "3072m", "CUDA_DEVICE_SM_LIMIT": "30"}},
	}
	hostLib, err := os.ReadFile(library)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"two-cards", "capped"} {
		pod := e.gpuPod(name, pods[name].units)
		pod.Annotations = pods[name].ann
		pod.Spec.HostNetwork = true
		pod.Spec.AutomountServiceAccountToken = new(bool)
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": framework.RealNodeName}
		c := &pod.Spec.Containers[0]
		c.Image, c.ImagePullPolicy = framework.LocalImage, v1.PullNever
		c.Command = []string{"sh", "-c", script}
		e.create(pod)
		e.waitBound(name, time.Minute)
	}
	uids := map[string]string{}
	for _, name := range []string{"two-cards", "capped"} {
		pod := e.waitRunning(name, 2*time.Minute)
		uids[name] = string(pod.UID)
		// the probe lines come after the env lines: wait for the last one (/overrideEnv)
		var got map[string]string
		if err := poll(e.ctx, 30*time.Second, func() (bool, error) {
			got = e.containerEnv(name)
			_, done := got["OVERRIDE_BYTES"]
			return done, nil
		}); err != nil {
			t.Fatalf("pod %s never printed its probes: %v (%v)", name, err, got)
		}
		t.Logf("pod %s sees: %v", name, got)
		want := map[string]string{
			"PRELOAD": library, "LIBBYTES": strconv.Itoa(len(hostLib)), "LIBMAGIC": "ELF",
			"PRELOAD_WRITABLE": "no", "LIB_WRITABLE": "no", "COUNTERS_WRITABLE": "yes", "OVERRIDE_BYTES": "0",
			"CUDA_DEVICE_ORDER": "PCI_BUS_ID",
		}
		for k, v := range pods[name].want {
			want[k] = v
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("pod %s: %s=%q, want %q", name, k, got[k], v)
			}
		}
		cards := strings.Split(got[contract.EnvVisibleDevices], ",")
		for i := range cards {
			if got[contract.EnvVisibleDevices] == "" || got["CUDA_DEVICE_MEMORY_LIMIT_"+strconv.Itoa(i)] == "" {
				t.Errorf("pod %s sees card %d (%s) without a limit", name, i, got[contract.EnvVisibleDevices])
			}
		}
		if _, extra := got["CUDA_DEVICE_MEMORY_LIMIT_"+strconv.Itoa(len(cards))]; extra {
			t.Errorf("pod %s has more limits than the %d cards it sees", name, len(cards))
		}
		if !strings.HasPrefix(got["CUDA_DEVICE_MEMORY_SHARED_CACHE"], "/tmp/gpushare/vgpu-") {
			t.Errorf("pod %s: CUDA_DEVICE_MEMORY_SHARED_CACHE=%q", name, got["CUDA_DEVICE_MEMORY_SHARED_CACHE"])
		}
		if _, err := os.Stat(filepath.Join(stateDir, "pods", uids[name], "main", "probe")); err != nil {
			t.Errorf("pod %s: the container's counter folder is not the host's per-pod folder: %v", name, err)
		}
	}
	checkLimitMetrics(t, e.c.PluginMetricsURL, map[string]int{"two-cards": 2, "capped": 1})

	// the counter folder goes with the pod
	if err := e.c.Client.CoreV1().Pods("default").Delete(e.ctx, "capped", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := poll(e.ctx, 2*time.Minute, func() (bool, error) {
		_, err := os.Stat(filepath.Join(stateDir, "pods", uids["capped"]))
		return os.IsNotExist(err), err
	}); err != nil {
		t.Errorf("the deleted pod's counter folder stayed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "pods", uids["two-cards"])); err != nil {
		t.Errorf("the running pod's counter folder went: %v", err)
	}
	inv, err := e.c.CheckInvariants(e.ctx, "default", e.ext)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.OK() {
		t.Errorf("invariants: %s", inv)
	}
}

// buildSharedObject compiles the stand-in for HAMi-core's libvgpu.so
// (testdata/hami-core-stand-in.c, which make demo builds too) for this machine at path: what
// the tests check is that the containers get the library, not what it does.
func buildSharedObject(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := filepath.Abs(filepath.Join("testdata", "hami-core-stand-in.c"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-o", path, src).CombinedOutput(); err != nil {
		t.Fatalf("cc -shared (cgo needs a C compiler on this machine anyway): %v\n%s", err, out)
	}
}

// checkLimitMetrics waits until the plugin's /metrics reports hami-core and, for each pod, as
// many per-card limit series as cards it holds.
func checkLimitMetrics(t *testing.T, url string, cards map[string]int) {
	t.Helper()
	var body string
	err := poll(t.Context(), time.Minute, func() (bool, error) {
		resp, err := http.Get(url) //nolint:gosec,noctx // G107: the test's own plugin
		if err != nil {
			return false, err
		}
		defer func() { _ = resp.Body.Close() }()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return false, err
		}
		body = string(raw)
		if !strings.Contains(body, `gpushare_memory_enforcement{configured="hami-core",mode="hami-core"} 1`) {
			return false, nil
		}
		for pod, n := range cards {
			if strings.Count(body, `gpushare_container_gpu_memory_limit_bytes{container="main"`) < 1 ||
				countLines(body, "gpushare_container_gpu_memory_limit_bytes{", `pod="`+pod+`"`) != n {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("plugin metrics never showed the limits: %v\n%s", err, grepLines(body, "gpushare_memory_enforcement", "gpushare_container_gpu_memory_limit_bytes"))
	}
}

func countLines(body, prefix, contains string) int {
	n := 0
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, contains) {
			n++
		}
	}
	return n
}

func grepLines(body string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
