package e2e

import (
	"context"
	"fmt"
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
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// e2eImageTag is the tag `make images` stamps on the images this test builds.
const (
	e2eImageRepo = "localhost/gpushare"
	e2eImageTag  = "e2e"
)

// TestManifestsOnRealNode installs gpushare as an operator would, from images built by `make
// images`, onto a real kubelet with containerd, once from the shipped kustomize overlay and once
// from the Helm chart (rendered by `helm template`):
//   - every rendered object of both modes (the cluster's kube-scheduler; a second scheduler)
//     passes a server-side dry run;
//   - the extender runs as a Deployment and the share-plugin (its fake-NVML image) as a
//     DaemonSet, each with its own service account and RBAC, talking to the API server with the
//     pod's token; kube-scheduler (config/scheduler-config.yaml) calls the extender pod over
//     mutual TLS;
//   - a pod asking 3 units then runs on a card and sees that card in its environment, and the
//     invariant check passes.
//
// This machine has no pod network and no kube-proxy, so a small overlay of the test's own
// adapts the objects and nothing else: host network, the API server's address, one extender
// replica (two would share the host's port), the kubelet's pod-resources folder (the test's
// kubelet has its own --root-dir), its containerd socket (the image check), the fake-NVML
// flags, and the images' tags. The chart also installs the admission policies (the fence among
// them), so its half runs the extender and the share-plugin under them; the default namespace
// is exempt from their pod-security rules for the test's host-network pod.
func TestManifestsOnRealNode(t *testing.T) {
	claimRealNode(t)

	dir := artifactDir(t)
	images := filepath.Join(dir, "images")
	t0 := time.Now()
	if out, err := exec.Command("make", "-C", s.root, "images", "helm",
		"IMAGE_REPO="+e2eImageRepo, "IMAGE_TAG="+e2eImageTag, "IMAGES_DIR="+images).CombinedOutput(); err != nil {
		t.Fatalf("make images helm: %v\n%s", err, out)
	}
	t.Logf("make images helm: %.1f s", time.Since(t0).Seconds())
	pause := filepath.Join(s.work, "pause")
	if err := goBuild(pause, "./cmd/pause"); err != nil {
		t.Fatal(err)
	}

	t.Run("kustomize", func(t *testing.T) {
		e := newBareEnv(t)
		for _, overlay := range []string{"default", "gpushare-scheduler"} {
			out, err := e.kubectl("apply", "--dry-run=server", "-k", filepath.Join(s.root, "config", overlay))
			if err != nil {
				t.Fatalf("server-side dry run of config/%s: %v", overlay, err)
			}
			t.Logf("config/%s, server-side dry run:\n%s", overlay, strings.TrimSpace(out))
		}
		e.installAndRun(pause, images, filepath.Join(s.root, "config", "default"))
	})
	t.Run("helm", func(t *testing.T) {
		e := newBareEnv(t)
		chartDir := filepath.Join(artifactDir(t), "chart")
		for _, mode := range []string{"second-scheduler", "kube-scheduler"} { // the last one is installed
			if err := renderChart(chartDir, "--set", "mode="+mode); err != nil {
				t.Fatal(err)
			}
			out, err := e.kubectl("apply", "--dry-run=server", "-k", chartDir)
			if err != nil {
				t.Fatalf("server-side dry run of the chart (mode=%s): %v", mode, err)
			}
			t.Logf("chart, mode=%s, server-side dry run:\n%s", mode, strings.TrimSpace(out))
		}
		e.installAndRun(pause, images, chartDir)
	})
}

// renderChart writes `helm template gpushare charts/gpushare -n kube-system <args>` and a
// kustomization of it into dir.
func renderChart(dir string, args ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	helm := filepath.Join(s.root, "bin", "tools", "helm")
	out, err := exec.Command(helm, append([]string{"template", "gpushare", filepath.Join(s.root, "charts", "gpushare"), "-n", "kube-system"}, args...)...).Output()
	if err != nil {
		return fmt.Errorf("helm template: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rendered.yaml"), out, 0o644); err != nil {
		return err
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [rendered.yaml]\n"
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}

// installAndRun starts a real node, imports the images from `make images` (in images), applies
// base with the test's overlay, starts kube-scheduler, and runs a GPU pod (see
// TestManifestsOnRealNode).
func (e *env) installAndRun(pause, images, base string) {
	t := e.t
	// the DaemonSet's state folder, shared as on a systemd host (its tmpfs counter folders
	// reach the host through Bidirectional propagation); undone after the node stops
	unshare, err := framework.SharedHostDir(deviceplugin.DefaultMemoryLimitState)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unshare)
	node, err := e.c.StartRealNode(e.ctx, pause)
	t.Cleanup(func() { node.Stop(e.ctx) }) // before the control plane stops
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range []string{"extender.tar", "share-plugin-fakenvml.tar"} {
		if err := node.ImportImage(filepath.Join(images, img)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.kubectl("label", "node", framework.RealNodeName, "gpushare=true"); err != nil {
		t.Fatal(err)
	}
	// the chart installs the admission policies: the test's pod needs the host's network (no
	// pod network here), which they allow in an exempt namespace only
	if _, err := e.kubectl("label", "namespace", "default", "gpushare.io/pod-security-exempt=true"); err != nil {
		t.Fatal(err)
	}
	pki := e.c.PKI
	if _, err := e.kubectl("-n", "kube-system", "create", "secret", "generic", "gpushare-extender-tls",
		"--from-file=tls.crt="+pki.ServerCert, "--from-file=tls.key="+pki.ServerKey, "--from-file=ca.crt="+pki.CAFile); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kubectl("-n", "kube-system", "create", "secret", "generic", "gpushare-extender-hold-key",
		"--from-file=hold.key="+e.c.HoldKeyFile); err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(artifactDir(t), "overlay")
	if err := writeE2EOverlay(overlay, base, e.c.Server(), port, node.PodResourcesDir(), node.ContainerdSocket()); err != nil {
		t.Fatal(err)
	}
	tApply := time.Now()
	if out, err := e.kubectl("apply", "-k", overlay); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("kubectl apply -k (%s + the test's overlay):\n%s", base, strings.TrimSpace(out))
	}
	t.Cleanup(func() { e.removeWorkloads(overlay) }) // runs before node.Stop
	// kube-scheduler places the gpushare pods themselves too: they ask no gpu-mem, so its
	// filter entry skips them and its ignorable prioritize entry may fail while the extender
	// is not up yet.
	if err := e.c.StartScheduler(fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		t.Fatal(err)
	}

	gpus, err := e.c.WaitNodeGPUs(e.ctx, framework.RealNodeName, 3*time.Minute)
	if err != nil {
		t.Fatalf("the share-plugin DaemonSet never advertised GPUs: %v\n%s", err, e.kubeSystemState())
	}
	t.Logf("DaemonSet's share-plugin advertises %d GPUs", len(gpus))
	client, err := e.c.ExtenderClient(true)
	if err != nil {
		t.Fatal(err)
	}
	e.ext = &framework.Extender{Port: port, Client: client}
	if err := poll(e.ctx, 3*time.Minute, func() (bool, error) {
		d, err := e.c.Client.AppsV1().Deployments("kube-system").Get(e.ctx, "gpushare-extender", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 1, err
	}); err != nil {
		t.Fatalf("the extender Deployment never became available: %v\n%s", err, e.kubeSystemState())
	}
	t.Logf("extender Deployment available %.1f s after the apply", time.Since(tApply).Seconds())

	const units = 3
	pod := e.gpuPod("manifest-pod", units)
	pod.Spec.HostNetwork = true
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": framework.RealNodeName}
	c := &pod.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = framework.LocalImage, v1.PullNever
	c.Command = []string{"sh", "-c", "env | grep -E '^(NVIDIA_VISIBLE_DEVICES|ALIYUN_COM_GPU_MEM_[A-Z]+)=' | sort; sleep 3600"}
	e.create(pod)
	running := e.waitRunning(pod.Name, 2*time.Minute)
	idx, err := strconv.Atoi(running.Annotations[contract.AnnotationIndex])
	if err != nil {
		t.Fatalf("GPU index annotation %q: %v", running.Annotations[contract.AnnotationIndex], err)
	}
	envs := e.containerEnv(pod.Name)
	t.Logf("pod %s on GPU%d: %v", pod.Name, idx, envs)
	if got, want := envs[contract.EnvVisibleDevices], uuidOf(t, gpus, idx); got != want {
		t.Errorf("%s=%q, want GPU%d's %q", contract.EnvVisibleDevices, got, idx, want)
	}
	if got := envs[contract.EnvContainer]; got != strconv.Itoa(units) {
		t.Errorf("%s=%q, want %d", contract.EnvContainer, got, units)
	}
	e.checkPluginMetrics("http://127.0.0.1:9446/metrics", gpus) // the DaemonSet's port, on the host network here
	inv, err := e.c.CheckInvariants(e.ctx, "default", e.ext)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.OK() {
		t.Errorf("invariants: %s", inv)
	}
	e.checkConsistent(map[string][]contract.GPU{framework.RealNodeName: gpus})
}

// newBareEnv is a control plane with the controller manager and nothing of ours: the test
// installs gpushare itself.
func newBareEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, ctx: ctx}
	dir := artifactDir(t)
	c, err := framework.New(framework.Options{Root: s.root, Bin: s.bin, Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	t.Cleanup(func() {
		cancel()
		c.Stop()
		if t.Failed() {
			dumpLogs(t, dir)
		}
	})
	if err := c.StartControlPlane(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.StartControllerManager(); err != nil {
		t.Fatal(err)
	}
	return e
}

// writeE2EOverlay writes the kustomization that adapts base to this machine (see
// TestManifestsOnRealNode) into dir.
func writeE2EOverlay(dir, base, apiServer string, port int, podResources, containerd string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, base) // kustomize takes no absolute paths
	if err != nil {
		return err
	}
	host, apiPort, ok := strings.Cut(strings.TrimPrefix(apiServer, "https://"), ":")
	if !ok {
		return fmt.Errorf("API server address %q has no port", apiServer)
	}
	apiEnv := fmt.Sprintf(`
      - op: add
        path: /spec/template/spec/hostNetwork
        value: true
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_HOST, value: %q}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_PORT, value: %q}`, host, apiPort)
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %[1]s
images:
  - {name: gpushare/extender, newName: %[2]s/extender, newTag: %[3]s}
  - {name: gpushare/share-plugin, newName: %[2]s/share-plugin, newTag: %[3]s-fakenvml}
patches:
  - target: {kind: Deployment, name: gpushare-extender}
    patch: |%[4]s
      - op: replace
        path: /spec/replicas
        value: 1
      - op: replace
        path: /spec/template/spec/containers/0/args/0
        value: --address=:%[5]d
      - op: replace
        path: /spec/template/spec/containers/0/ports/0/containerPort
        value: %[5]d
  - target: {kind: DaemonSet, name: gpushare-share-plugin}
    patch: |%[4]s
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --fake-gpus=dgxa100
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --fake-gpu-count=2
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --fake-gpu-memory=16Gi
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --containerd-socket=%[7]s
      - op: replace
        path: /spec/template/spec/volumes/1/hostPath/path
        value: %[6]s
`, rel, e2eImageRepo, e2eImageTag, apiEnv, port, podResources, containerd)
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}

// removeWorkloads deletes what the overlay created and the kube-system pods on the real node,
// so that the node stops with no container of ours running.
func (e *env) removeWorkloads(overlay string) {
	if _, err := e.kubectl("delete", "-k", overlay, "--ignore-not-found", "--wait=false"); err != nil {
		e.t.Logf("delete -k: %v", err)
	}
	pods := e.c.Client.CoreV1().Pods("kube-system")
	_ = pods.DeleteCollection(e.ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{FieldSelector: "spec.nodeName=" + framework.RealNodeName})
}

// kubeSystemState is the workloads, pods and recent events of kube-system, for a failure.
func (e *env) kubeSystemState() string {
	out, _ := e.kubectl("-n", "kube-system", "get", "deploy,ds,pods", "-o", "wide")
	ev, _ := e.kubectl("-n", "kube-system", "get", "events", "--sort-by=.lastTimestamp")
	logs, _ := e.kubectl("-n", "kube-system", "logs", "-l", "app.kubernetes.io/name in (gpushare-extender,gpushare-share-plugin)", "--tail=20", "--prefix")
	return out + "\n" + ev + "\n" + logs
}
