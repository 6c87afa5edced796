package e2e

import (
	"fmt"
	"os"
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

// TestRealKubelet is the full stack on this machine: a real kubelet with containerd and runc
// (node "localhost"), share-plugin on a mocked NVML registering gpu-mem with it, our extender
// and kube-scheduler. Two pods share one card; each container's environment (kubectl logs)
// must name its own pod's GPU UUID and units.
func TestRealKubelet(t *testing.T) {
	e, gpus := startRealNodeWithPlugin(t)
	t.Logf("node %s advertises %d GPUs: %+v", framework.RealNodeName, len(gpus), gpus)

	// a (3) and b (5) share one card (binpack); c (12) no longer fits there and takes the other
	units := map[string]int64{"share-a": 3, "share-b": 5, "other-c": 12}
	for _, name := range []string{"share-a", "share-b", "other-c"} {
		pod := e.gpuPod(name, units[name])
		pod.Spec.HostNetwork = true
		// no kube-root-ca.crt publisher runs, so no service-account volume can be mounted
		pod.Spec.AutomountServiceAccountToken = new(bool)
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": framework.RealNodeName}
		c := &pod.Spec.Containers[0]
		c.Image, c.ImagePullPolicy = framework.LocalImage, v1.PullNever
		c.Command = []string{"sh", "-c", "env | grep -E '^(NVIDIA_VISIBLE_DEVICES|ALIYUN_COM_GPU_MEM_[A-Z]+)=' | sort; sleep 3600"}
		e.create(pod)
		e.waitBound(name, time.Minute) // in order, so that binpack's choice is deterministic
	}
	cards := map[string]string{}
	for _, name := range []string{"share-a", "share-b", "other-c"} {
		pod := e.waitRunning(name, 2*time.Minute)
		idx, err := strconv.Atoi(pod.Annotations[contract.AnnotationIndex])
		if err != nil {
			t.Fatalf("pod %s: GPU index annotation %q: %v", name, pod.Annotations[contract.AnnotationIndex], err)
		}
		envs := e.containerEnv(name)
		t.Logf("pod %s on GPU%d: %v", name, idx, envs)
		u := strconv.FormatInt(units[name], 10)
		want := map[string]string{
			contract.EnvVisibleDevices: uuidOf(t, gpus, idx),
			contract.EnvIndex:          strconv.Itoa(idx),
			contract.EnvContainer:      u,
			contract.EnvPod:            u,
			contract.EnvDev:            strconv.FormatInt(unitsOf(t, gpus, idx), 10),
		}
		for k, v := range want {
			if envs[k] != v {
				t.Errorf("pod %s: %s=%q, want %q", name, k, envs[k], v)
			}
		}
		cards[name] = envs[contract.EnvVisibleDevices]
	}
	e.checkPluginMetrics(e.c.PluginMetricsURL, gpus)
	if cards["share-a"] != cards["share-b"] || cards["share-a"] == cards["other-c"] {
		t.Errorf("cards %v: want share-a and share-b on one card, other-c on the other", cards)
	}
	// after Allocate the plugin marks each pod assigned
	for _, name := range []string{"share-a", "share-b", "other-c"} {
		err := poll(e.ctx, 30*time.Second, func() (bool, error) {
			p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
			return err == nil && p.Annotations[contract.AnnotationAssigned] == "true", err
		})
		if err != nil {
			t.Errorf("pod %s never marked %s=true: %v", name, contract.AnnotationAssigned, err)
		}
	}
}

// startRealNodeWithPlugin is the full stack of TestRealKubelet: the control plane, our
// extender and kube-scheduler, a real kubelet with containerd (node "localhost") and share-plugin
// on two mocked 16 GiB cards (go-nvml's dgxa100 mock host, cut down) with pluginFlags added. It
// returns once the node advertises the cards.
func startRealNodeWithPlugin(t *testing.T, pluginFlags ...string) (*env, []contract.GPU) {
	t.Helper()
	e, _, gpus := startRealNodeWith(t, framework.RealNodeOptions{}, pluginFlags...)
	return e, gpus
}

// startRealNodeWith is startRealNodeWithPlugin on a node shaped by o; it also returns the node.
func startRealNodeWith(t *testing.T, o framework.RealNodeOptions, pluginFlags ...string) (*env, *framework.RealNode, []contract.GPU) {
	t.Helper()
	return startRealNodePrepared(t, o, nil, pluginFlags...)
}

// startRealNodePrepared is startRealNodeWith with prepare run on the cluster before share-plugin
// starts; the flags prepare returns are added to the plugin's.
func startRealNodePrepared(t *testing.T, o framework.RealNodeOptions, prepare func(*env) []string, pluginFlags ...string) (*env, *framework.RealNode, []contract.GPU) {
	t.Helper()
	claimRealNode(t)
	plugin, err := framework.BuildGpushare(s.root, s.work, "share-plugin", "-tags=fakenvml")
	if err != nil {
		t.Fatal(err)
	}
	pause := filepath.Join(s.work, "pause")
	if err := goBuild(pause, "./cmd/pause"); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	node, err := e.c.StartRealNodeWith(e.ctx, pause, o)
	t.Cleanup(func() { node.Stop(e.ctx) }) // before the control plane stops
	if err != nil {
		t.Fatal(err)
	}
	flags := append([]string{"--fake-gpus=dgxa100", "--fake-gpu-count=2", "--fake-gpu-memory=16Gi",
		"--pod-resources-socket=" + node.PodResourcesSocket(), "--containerd-socket=" + node.ContainerdSocket(), "--v=4"}, pluginFlags...)
	if prepare != nil {
		flags = append(flags, prepare(e)...)
	}
	if err := e.c.StartSharePlugin(plugin, framework.RealNodeName, flags...); err != nil {
		t.Fatal(err)
	}
	gpus, err := e.c.WaitNodeGPUs(e.ctx, framework.RealNodeName, 2*time.Minute)
	if err != nil {
		t.Fatalf("real node never advertised GPUs: %v", err)
	}
	return e, node, gpus
}

// claimRealNode skips t where a real kubelet cannot run (not root, or containerd, runc and
// busybox-static cannot be installed), and otherwise takes the machine's device-plugin folder
// for t, released after everything t registers later (the node's stop included).
func claimRealNode(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("\n" + banner + "\nSKIP " + t.Name() + ": a real kubelet needs root\n" + banner)
	}
	if err := framework.InstallNodeTools(); err != nil {
		t.Skip("\n" + banner + "\nSKIP " + t.Name() + ": containerd/runc/busybox-static unavailable: " + err.Error() + "\n" + banner)
	}
	unlock, err := framework.LockDevicePluginDir(10*time.Minute, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
}

func goBuild(out, pkg string) error {
	cmd := execCommand("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	return nil
}

func (e *env) waitRunning(name string, timeout time.Duration) *v1.Pod {
	e.t.Helper()
	pod := &v1.Pod{}
	err := poll(e.ctx, timeout, func() (bool, error) {
		p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Status.Phase == v1.PodRunning, nil
	})
	if err != nil {
		e.t.Fatalf("pod %s not Running (phase %s): %v\nevents:\n%s", name, pod.Status.Phase, err, e.events(name))
	}
	return pod
}

// containerEnv reads the variables the pod printed, through kubectl logs (apiserver → kubelet).
func (e *env) containerEnv(name string) map[string]string {
	e.t.Helper()
	env, err := e.logVars(name, func(vars map[string]string) bool { return vars[contract.EnvVisibleDevices] != "" })
	if err != nil {
		e.t.Fatalf("pod %s printed no GPU env: %v", name, err)
	}
	return env
}

// logVars reads the NAME=value lines pod name printed, through kubectl logs, until done says
// they are all there (up to 30 s).
func (e *env) logVars(name string, done func(map[string]string) bool) (map[string]string, error) {
	vars := map[string]string{}
	err := poll(e.ctx, 30*time.Second, func() (bool, error) {
		out, err := e.kubectl("logs", name)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
				vars[k] = v
			}
		}
		return done(vars), fmt.Errorf("logs: %q", out)
	})
	return vars, err
}

func uuidOf(t *testing.T, gpus []contract.GPU, idx int) string {
	for _, g := range gpus {
		if g.Index == idx {
			return g.UUID
		}
	}
	t.Fatalf("no GPU %d on the node", idx)
	return ""
}

func unitsOf(t *testing.T, gpus []contract.GPU, idx int) int64 {
	for _, g := range gpus {
		if g.Index == idx {
			return g.Units
		}
	}
	t.Fatalf("no GPU %d on the node", idx)
	return 0
}
