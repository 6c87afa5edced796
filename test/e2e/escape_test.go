package e2e

import (
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// What the escape suite runs with: the plugin polices every second, each counter folder is a
// 4 MiB tmpfs, and a process may use its limit plus escapeAllowance before it is killed.
const (
	escapeCounterSize = 4 << 20
	escapeAllowance   = 512 << 20
	// escapeImage has /etc/ld.so.preload as a symlink into /tmp; gpuImage a dynamically linked
	// program (the loader reads /etc/ld.so.preload for it) that prints its limit and waits.
	escapeImage = "localhost/gpushare/e2e-symlinked-preload:1"
	gpuImage    = "localhost/gpushare/e2e-gpuproc:1"
	// redirectImage has /tmp as a symlink to /data, on the way to the counter folder.
	redirectImage = "localhost/gpushare/e2e-redirected-tmp:1"
	// tenantNS is a namespace without the pod-security exemption; default has it, because
	// pods on this node need hostNetwork (no CNI plugin here).
	tenantNS     = "tenant"
	reasonEscape = "GPUMemoryLimitEscaped"
	// reasonImageRefused: the plugin refused to start a container for its image.
	reasonImageRefused = "GPUShareImageRefused"
)

// escapeEnv is the real node of TestEscape with the policies installed.
type escapeEnv struct {
	*env
	gpus     []contract.GPU
	procs    string // the fake NVML's process file
	stateDir string
	library  string
	extender kubernetes.Interface // a client acting as the extender's service account
}

// TestEscapeFromGPUMemoryLimit runs the classes of escape a tenant tried against
// share-plugin --memory-limit=hami-core (docs/security.md, "Threat model") on the real kubelet and
// containerd, mocked NVML, with config/admission/ and the RBAC installed and share-plugin acting
// as its own service account. Each case is refused when the pod is created, refused by the
// plugin at Allocate, or caught by the plugin's policing from the host (the offending
// processes killed, a Warning event); the limit a container sees never changes unnoticed. It
// ends with the invariant check.
func TestEscapeFromGPUMemoryLimit(t *testing.T) {
	x := startEscapeEnv(t)
	t.Run("paths", x.pathCases)
	t.Run("env", x.envCases)
	t.Run("placement", x.placementCases)
	t.Run("namespaces", x.namespaceCases)
	t.Run("interposer", x.interposerCases)
	t.Run("disk", x.diskCases)
	t.Run("holds", x.holdCases)
	inv, err := x.c.CheckInvariants(x.ctx, "default", x.ext)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.OK() {
		t.Errorf("invariants: %s", inv)
	}
}

func startEscapeEnv(t *testing.T) *escapeEnv {
	t.Helper()
	dir := artifactDir(t)
	x := &escapeEnv{procs: filepath.Join(dir, "gpu-processes.json"), stateDir: filepath.Join(dir, "hami-core-state"),
		library: filepath.Join(dir, "hami-core", "libvgpu.so")}
	buildSharedObject(t, x.library)
	t.Cleanup(func() { framework.UnmountUnder(x.stateDir) }) // after the node stops: its pods' tmpfs counter folders
	prepare := func(e *env) []string {
		x.env = e
		x.installPolicies()
		user, groups := framework.ServiceAccountUser(gpushareNS, pluginSA)
		kc, err := e.c.KubeconfigAs(user, groups, map[string][]string{nodeNameClaim: {framework.RealNodeName}})
		if err != nil {
			t.Fatal(err)
		}
		return []string{"--kubeconfig=" + kc}
	}
	_, node, gpus := startRealNodePrepared(t, framework.RealNodeOptions{}, prepare,
		"--memory-limit=hami-core", "--hami-core-library="+x.library, "--hami-core-state-dir="+x.stateDir,
		"--hami-core-collect-after=2s", "--hami-core-counter-size="+strconv.Itoa(escapeCounterSize),
		"--fake-gpu-processes-file="+x.procs, "--usage-period=1s", "--image-check=containerd", "--limit-escape-allowance="+strconv.Itoa(escapeAllowance))
	x.gpus = gpus
	x.importImages(t, node, dir)
	user, groups := framework.ServiceAccountUser(gpushareNS, extenderSA)
	kc, err := x.c.KubeconfigAs(user, groups, nil)
	if err != nil {
		t.Fatal(err)
	}
	if x.extender, err = clientFor(kc); err != nil {
		t.Fatal(err)
	}
	return x
}

// installPolicies applies the RBAC and config/admission/, waits until the pod-requests policy
// refuses, exempts default (hostNetwork) and creates the tenant namespace.
func (x *escapeEnv) installPolicies() {
	a := &admissionEnv{t: x.t, ctx: x.ctx, c: x.c, admin: x.c.Client}
	a.ensureNamespaces()
	a.applyManifests()
	if err := x.c.EnsureNamespace(x.ctx, tenantNS); err != nil {
		x.t.Fatal(err)
	}
	patch := mustJSON(x.t, map[string]any{"metadata": map[string]any{"labels": map[string]string{"gpushare.io/pod-security-exempt": "true"}}})
	if _, err := x.c.Client.CoreV1().Namespaces().Patch(x.ctx, "default", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		x.t.Fatal(err)
	}
	probe := x.pod(tenantNS, "probe", 1, "true")
	probe.Spec.SecurityContext = nil
	err := poll(x.ctx, time.Minute, func() (bool, error) {
		_, err := x.c.Client.CoreV1().Pods(tenantNS).Create(x.ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "gpushare-pod-requests"), nil
	})
	if err != nil {
		x.t.Fatalf("the pod-requests policy never refused a pod without seccomp: %v", err)
	}
}

// importImages imports escapeImage and gpuImage into the node's containerd.
func (x *escapeEnv) importImages(t *testing.T, node *framework.RealNode, dir string) {
	t.Helper()
	if err := node.ImportBusyboxImage(escapeImage, map[string]framework.ImageFile{"etc/ld.so.preload": {Link: "/tmp/preload"}}); err != nil {
		t.Fatal(err)
	}
	if err := node.ImportBusyboxImage(redirectImage, map[string]framework.ImageFile{"tmp": {Link: "/data"}}); err != nil {
		t.Fatal(err)
	}
	importGPUProcImage(t, node, dir)
}

// importGPUProcImage builds gpuproc (a dynamically linked program: the loader reads
// /etc/ld.so.preload for it, that prints CUDA_DEVICE_MEMORY_LIMIT_0 and waits) in dir and
// imports gpuImage, busybox with gpuproc and its loader and libc, into the node's containerd.
func importGPUProcImage(t *testing.T, node *framework.RealNode, dir string) {
	t.Helper()
	src := filepath.Join(dir, "gpuproc.c")
	bin := filepath.Join(dir, "gpuproc")
	prog := "#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n" +
		"int main(void) { const char *l = getenv(\"CUDA_DEVICE_MEMORY_LIMIT_0\");\n" +
		"  printf(\"LIMIT=%s\\n\", l ? l : \"\"); fflush(stdout); for (;;) pause(); }\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	files := map[string]framework.ImageFile{"bin/gpuproc": {Src: bin}}
	for _, lib := range []string{"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6"} {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			t.Skipf("this test's dynamically linked image needs %s: %v", lib, err)
		}
		files[strings.TrimPrefix(lib, "/")] = framework.ImageFile{Src: real}
	}
	if err := node.ImportBusyboxImage(gpuImage, files); err != nil {
		t.Fatal(err)
	}
}

// pod is a pod on the real node asking units of gpu-mem, running script with sh, with the
// RuntimeDefault seccomp profile; it needs hostNetwork to run (exempt namespace only).
func (x *escapeEnv) pod(ns, name string, units int64, script string) *v1.Pod {
	pod := x.gpuPod(name, units)
	pod.Namespace = ns
	pod.Spec.HostNetwork = ns == "default"
	pod.Spec.AutomountServiceAccountToken = new(bool)
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": framework.RealNodeName}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
	c := &pod.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = framework.LocalImage, v1.PullNever
	c.Command = []string{"sh", "-c", script}
	return pod
}

// refused creates pod and wants the pod-requests policy to refuse it with each of says.
func (x *escapeEnv) refused(t *testing.T, pod *v1.Pod, says ...string) {
	t.Helper()
	_, err := x.c.Client.CoreV1().Pods(pod.Namespace).Create(x.ctx, pod, metav1.CreateOptions{})
	if err == nil {
		t.Fatalf("pod %s/%s was admitted", pod.Namespace, pod.Name)
	}
	for _, w := range append([]string{"ValidatingAdmissionPolicy 'gpushare-pod-requests'"}, says...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal does not say %q: %v", w, err)
		}
	}
	t.Logf("refused: %v", err)
}

func (x *escapeEnv) pathCases(t *testing.T) {
	withMount := func(name, path, subPath string) *v1.Pod {
		p := x.pod(tenantNS, name, 1, "sleep 3600")
		p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: path, SubPath: subPath}}
		return p
	}
	t.Run("relative mount path onto the preload", func(t *testing.T) {
		x.refused(t, withMount("relative", "etc/ld.so.preload", ""), `mounts at "etc/ld.so.preload"`)
	})
	t.Run("dot-dot mount path onto the preload", func(t *testing.T) {
		x.refused(t, withMount("dotdot", "/tmp/../etc/ld.so.preload", ""), `mounts at "/tmp/../etc/ld.so.preload"`)
	})
	t.Run("file mounted under etc", func(t *testing.T) {
		x.refused(t, withMount("under-etc", "/etc/app.conf", "app.conf"), `mounts at "/etc/app.conf"`)
	})
	t.Run("termination message path onto the library", func(t *testing.T) {
		p := x.pod(tenantNS, "termination", 1, "sleep 3600")
		p.Spec.Containers[0].TerminationMessagePath = "/usr/local/gpushare/hami-core/libvgpu.so"
		x.refused(t, p, `mounts at "/usr/local/gpushare/hami-core/libvgpu.so"`)
	})
	t.Run("image whose preload is a symlink", x.symlinkedPreload)
	t.Run("image that redirects the counter folder into a volume", x.counterIntoVolume)
}

// symlinkedPreload runs an image whose /etc/ld.so.preload is a symlink into /tmp: runc would
// follow it and put the plugin's read-only preload at /tmp/preload, which the container could
// then remove. The plugin checks the image in PreStartContainer (the kubelet calls it after the
// pull and before the container is created) and refuses it: the container is never created.
func (x *escapeEnv) symlinkedPreload(t *testing.T) {
	p := x.pod("default", "symlinked", 2, "sleep 3600")
	p.Spec.Containers[0].Image = escapeImage
	x.refusedAtStart(t, p, "/etc/ld.so.preload is a symlink")
}

// counterIntoVolume runs an image whose /tmp is a symlink to /data, where the pod mounts a
// volume (allowed: /data/gpushare is not a protected path): runc would bind the counter folder
// (/tmp/gpushare) through the symlink into the volume, which the pod's other containers share.
// The image is refused before the container is created.
func (x *escapeEnv) counterIntoVolume(t *testing.T) {
	p := x.pod("default", "counter-into-volume", 2, "sleep 3600")
	p.Spec.Containers[0].Image = redirectImage
	p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/data/gpushare"}}
	x.refusedAtStart(t, p, "/tmp is a symlink")
}

// refusedAtStart creates p (in default) and wants the plugin to refuse its container before it
// is created: a Warning event saying says, the kubelet's CreateContainerConfigError, and a
// container that never ran.
func (x *escapeEnv) refusedAtStart(t *testing.T, p *v1.Pod, says string) {
	t.Helper()
	x.create(p)
	x.waitBound(p.Name, time.Minute)
	t0 := time.Now()
	msg := x.waitEvent(t, p.Name, reasonImageRefused, says, 90*time.Second)
	t.Logf("refused %.1f s after the pod was bound: %s", time.Since(t0).Seconds(), msg)
	err := poll(x.ctx, time.Minute, func() (bool, error) {
		got, err := x.c.Client.CoreV1().Pods("default").Get(x.ctx, p.Name, metav1.GetOptions{})
		if err != nil || len(got.Status.ContainerStatuses) == 0 {
			return false, err
		}
		cs := got.Status.ContainerStatuses[0]
		if cs.State.Running != nil || cs.LastTerminationState.Terminated != nil || cs.State.Terminated != nil || cs.RestartCount != 0 {
			return false, fmt.Errorf("container %s ran: %+v", cs.Name, cs)
		}
		return cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError" && strings.Contains(cs.State.Waiting.Message, says), nil
	})
	if err != nil {
		t.Errorf("pod %s: want its container waiting in CreateContainerConfigError saying %q, never run: %v\nevents:\n%s", p.Name, says, err, x.events(p.Name))
	}
	x.deletePod(t, "default", p.Name)
}

func (x *escapeEnv) envCases(t *testing.T) {
	t.Run("envFrom without a prefix", func(t *testing.T) {
		p := x.pod(tenantNS, "envfrom", 1, "sleep 3600")
		p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "limits"}}}}
		x.refused(t, p, `container "main" takes env from ConfigMap limits without a prefix`)
	})
	t.Run("envFrom with a prefix that spells a limit", func(t *testing.T) {
		p := x.pod(tenantNS, "envfrom-prefix", 1, "sleep 3600")
		p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{Prefix: "CUDA_DEVICE_MEMORY_LIMIT_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}}
		x.refused(t, p, "with prefix CUDA_DEVICE_MEMORY_LIMIT_")
	})
	t.Run("a sidecar asks for every GPU", func(t *testing.T) {
		p := x.pod(tenantNS, "sidecar", 1, "sleep 3600")
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "sidecar", Image: framework.LocalImage,
			Env: []v1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}}})
		x.refused(t, p, `container "sidecar" sets NVIDIA_VISIBLE_DEVICES`)
	})
	t.Run("an init container lifts the limit", func(t *testing.T) {
		p := x.pod(tenantNS, "init-env", 1, "sleep 3600")
		p.Spec.InitContainers = []v1.Container{{Name: "setup", Image: framework.LocalImage, Command: []string{"true"},
			Env: []v1.EnvVar{{Name: "CUDA_DEVICE_MEMORY_LIMIT_0", Value: "80g"}}}}
		x.refused(t, p, `container "setup" sets CUDA_DEVICE_MEMORY_LIMIT_0`)
	})
	t.Run("limit from a ConfigMap key", func(t *testing.T) {
		p := x.pod(tenantNS, "valuefrom", 1, "sleep 3600")
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "CUDA_DEVICE_MEMORY_LIMIT_0", ValueFrom: &v1.EnvVarSource{
			ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "limits"}, Key: "l"}}}}
		x.refused(t, p, "sets CUDA_DEVICE_MEMORY_LIMIT_0")
	})
	t.Run("ephemeral container", func(t *testing.T) {
		p := x.pod("default", "debugged", 1, "sleep 3600")
		x.create(p)
		x.waitRunning(p.Name, 2*time.Minute)
		cur, err := x.c.Client.CoreV1().Pods("default").Get(x.ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name: "debug", Image: framework.LocalImage, Command: []string{"sleep", "3600"},
			Env: []v1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}}}})
		_, err = x.c.Client.CoreV1().Pods("default").UpdateEphemeralContainers(x.ctx, p.Name, cur, metav1.UpdateOptions{})
		if err == nil || !strings.Contains(err.Error(), `container "debug" sets NVIDIA_VISIBLE_DEVICES`) {
			t.Errorf("ephemeral container with NVIDIA_VISIBLE_DEVICES=all: %v, want refused", err)
		}
		x.deletePod(t, "default", p.Name)
	})
}

func (x *escapeEnv) placementCases(t *testing.T) {
	forged := map[string]string{contract.AnnotationAllocation: `{"0":{"0":16,"1":16}}`, contract.AnnotationIndex: "0,1"}
	t.Run("a user writes a placement", func(t *testing.T) {
		p := x.pod(tenantNS, "forged", 1, "sleep 3600")
		p.Spec.NodeName, p.Annotations = framework.RealNodeName, forged
		x.refused(t, p, contract.AnnotationAllocation, "written by the gpushare extender and share-plugin only")
	})
	t.Run("a placement larger than the ask reaches the plugin", x.forgedAtAllocate)
}

// forgedAtAllocate puts a placement of two cards of 16 units on a pod asking 1 unit, written
// by an account that may write placements (the extender's, as a compromised or buggy
// extender would), and binds it: the plugin refuses it at Allocate and the container never runs.
func (x *escapeEnv) forgedAtAllocate(t *testing.T) {
	p := x.pod("default", "overplaced", 1, "echo RAN=yes; sleep 3600")
	p.Spec.SchedulerName = "nobody"
	x.create(p)
	names := contract.DefaultNames()
	req, err := contract.ParseRequest(p, &names)
	if err != nil {
		t.Fatal(err)
	}
	ann, err := contract.PlacementAnnotations(contract.Allocation{"0": {0: 16, 1: 16}}, &req, map[int]int64{0: 16, 1: 16}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ann[contract.AnnotationFence] = x.fenceToken(t) // the leader's own token: only the placement is forged
	b := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Annotations: ann}, Target: v1.ObjectReference{Kind: "Node", Name: framework.RealNodeName}}
	if err := x.extender.CoreV1().Pods("default").Bind(x.ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind with a forged placement as the extender: %v", err)
	}
	var last *v1.Pod
	err = poll(x.ctx, time.Minute, func() (bool, error) {
		last, err = x.c.Client.CoreV1().Pods("default").Get(x.ctx, p.Name, metav1.GetOptions{})
		return err == nil && last.Status.Phase == v1.PodFailed, err
	})
	if err != nil {
		t.Fatalf("pod with a forged placement not refused by the kubelet: %v (phase %s)\nevents:\n%s", err, last.Status.Phase, x.events(p.Name))
	}
	t.Logf("refused at Allocate: %s: %s", last.Status.Reason, last.Status.Message)
	if !strings.Contains(last.Status.Message+x.events(p.Name), "asks 1") {
		t.Errorf("the refusal does not name the container's ask: %s\n%s", last.Status.Message, x.events(p.Name))
	}
	for _, cs := range last.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.RestartCount > 0 || cs.LastTerminationState.Terminated != nil {
			t.Errorf("container %s ran: %+v", cs.Name, cs.State)
		}
	}
	x.deletePod(t, "default", p.Name)
}

func (x *escapeEnv) namespaceCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1.Pod)
		says   string
	}{
		{"privileged", func(p *v1.Pod) { p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: new(true)} }, `container "main" is privileged`},
		{"sys-admin", func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Capabilities: &v1.Capabilities{Add: []v1.Capability{"sys_admin"}}}
		}, "adds capabilities sys_admin"},
		{"seccomp-unset", func(p *v1.Pod) { p.Spec.SecurityContext = nil }, "runs with seccomp unset"},
		{"seccomp-unconfined", func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}
		}, "runs with seccomp Unconfined"},
		{"host-pid", func(p *v1.Pod) { p.Spec.HostPID = true }, "the pod sets hostPID"},
		{"host-path", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "state", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/lib/gpushare"}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "state", MountPath: "/state"}}
		}, `volume "state" is a hostPath`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := x.pod(tenantNS, tc.name, 1, "sleep 3600")
			tc.mutate(p)
			x.refused(t, p, tc.says)
		})
	}
}

// interposerCases: what a container can do to an in-container interposer (set its own limit
// before CUDA starts) is caught from the host, where NVML says what its processes use.
func (x *escapeEnv) interposerCases(t *testing.T) {
	p := x.pod("default", "exporter", 4, "export CUDA_DEVICE_MEMORY_LIMIT_0=16384m; exec /bin/gpuproc")
	p.Spec.Containers[0].Image = gpuImage
	x.create(p)
	pod := x.waitRunning(p.Name, 2*time.Minute)
	if got := x.containerEnvRaw(p.Name)["LIMIT"]; got != "16384m" {
		t.Fatalf("the container's own export did not reach its process (LIMIT=%q): the case tests nothing", got)
	}
	pid := x.hostPID(t, pod, "gpuproc")
	card := cardIndex(t, pod)
	used := int64(4<<30) + escapeAllowance + 1<<30
	t0 := time.Now()
	x.setGPUProcesses(t, map[string][]map[string]int64{strconv.Itoa(card): {{"pid": int64(pid), "usedBytes": used}}})
	defer x.setGPUProcesses(t, nil)
	if err := poll(x.ctx, 30*time.Second, func() (bool, error) { return !processAlive(pid), nil }); err != nil {
		t.Fatalf("process %d using %d MiB over a 4096 MiB limit still runs: %v\nevents:\n%s", pid, used>>20, err, x.events(p.Name))
	}
	t.Logf("overrun to kill: %.2f s", time.Since(t0).Seconds())
	msg := x.waitEscapeEvent(t, p.Name, "4096", 30*time.Second)
	t.Logf("event: %s", msg)
	x.waitRestarted(t, p.Name, time.Minute)
	x.deletePod(t, "default", p.Name)
}

func (x *escapeEnv) diskCases(t *testing.T) {
	p := x.pod("default", "filler", 1,
		"busybox dd if=/dev/zero of=/tmp/gpushare/junk bs=1M count=60 2>/dev/null; echo WROTE=$(busybox stat -c %s /tmp/gpushare/junk); sleep 3600")
	x.create(p)
	pod := x.waitRunning(p.Name, 2*time.Minute)
	wrote, err := strconv.ParseInt(x.containerEnvRaw(p.Name)["WROTE"], 10, 64)
	if err != nil {
		t.Fatalf("the pod printed no size: %v", err)
	}
	t.Logf("the container wrote %d bytes of the 60 MiB it tried into its counter folder", wrote)
	if wrote > escapeCounterSize {
		t.Errorf("wrote %d bytes into /tmp/gpushare, more than its %d-byte tmpfs", wrote, escapeCounterSize)
	}
	var host int64
	_ = filepath.Walk(filepath.Join(x.stateDir, "pods", string(pod.UID)), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			host += fi.Size()
		}
		return nil
	})
	if host > escapeCounterSize {
		t.Errorf("the pod's counter folder holds %d bytes on the host, more than %d", host, escapeCounterSize)
	}
	x.deletePod(t, "default", p.Name)
}

// holdCases: a preemption hold is the extender's alone: users may not write one, and one the
// extender did not sign (written before the policy, or by another account) reserves nothing.
// The holders ask what their holds name (16 units), so only the missing signature can be why
// the holds are ignored.
func (x *escapeEnv) holdCases(t *testing.T) {
	until := time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
	hold := func(gpu int) string {
		return fmt.Sprintf(`{"node":%q,"gpu":%d,"units":16,"until":%q}`, framework.RealNodeName, gpu, until)
	}
	t.Run("a user writes a hold", func(t *testing.T) {
		p := x.pod(tenantNS, "user-hold", 1, "sleep 3600")
		p.Annotations = map[string]string{contract.DefaultPreemptionKey: hold(0)}
		x.refused(t, p, "written by the gpushare extender only")
	})
	t.Run("an unsigned hold reserves nothing", func(t *testing.T) {
		for gpu := range 2 {
			p := x.pod("default", "holder-"+strconv.Itoa(gpu), 16, "sleep 3600")
			p.Spec.SchedulerName = "nobody"
			x.create(p)
			patch := mustJSON(t, map[string]any{"metadata": map[string]any{"annotations": map[string]string{
				contract.DefaultPreemptionKey: hold(gpu), contract.AnnotationFence: x.fenceToken(t)}}})
			if _, err := x.extender.CoreV1().Pods("default").Patch(x.ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatalf("write an unsigned hold as the extender's account: %v", err)
			}
		}
		// a restarted extender rebuilds holds from the pods: it must drop these
		x.ext.Proc.Kill()
		ext, err := x.c.StartExtender(x.ctx, s.extender, x.ext.Port, x.extArgs...)
		if err != nil {
			t.Fatal(err)
		}
		x.ext = ext
		p := x.pod("default", "whole-card", 16, "sleep 3600")
		x.create(p)
		x.waitBound(p.Name, time.Minute)
		for _, n := range []string{"holder-0", "holder-1", "whole-card"} {
			x.deletePod(t, "default", n)
		}
	})
}

// fenceToken is the extender Lease's current term, "holder/leaseTransitions", which the
// extender-fence policy asks of the extender's writes: the forgeries above carry it, as a
// compromised or buggy leader's would, so that only what they forge is under test.
func (x *escapeEnv) fenceToken(t *testing.T) string {
	t.Helper()
	l, err := x.c.Client.CoordinationV1().Leases("kube-system").Get(x.ctx, "gpushare-extender", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the extender's Lease: %v", err)
	}
	var transitions int32
	if l.Spec.LeaseTransitions != nil {
		transitions = *l.Spec.LeaseTransitions
	}
	if l.Spec.HolderIdentity == nil {
		t.Fatal("the extender's Lease has no holder")
	}
	return *l.Spec.HolderIdentity + "/" + strconv.Itoa(int(transitions))
}

// waitEscapeEvent waits for the plugin's Warning event on pod whose message contains says.
func (x *escapeEnv) waitEscapeEvent(t *testing.T, pod, says string, timeout time.Duration) string {
	t.Helper()
	return x.waitEvent(t, pod, reasonEscape, says, timeout)
}

// waitEvent waits for a Warning event with reason on pod (in default) saying says.
func (x *escapeEnv) waitEvent(t *testing.T, pod, reason, says string, timeout time.Duration) string {
	t.Helper()
	var msg string
	err := poll(x.ctx, timeout, func() (bool, error) {
		list, err := x.c.Client.CoreV1().Events("default").List(x.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Type == v1.EventTypeWarning && ev.Reason == reason && strings.Contains(ev.Message, says) {
				msg = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event saying %q on pod %s: %v\nevents:\n%s", reason, says, pod, err, x.events(pod))
	}
	return msg
}

// waitRestarted waits until the pod's first container has been restarted (its processes killed).
func (x *env) waitRestarted(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	err := poll(x.ctx, timeout, func() (bool, error) {
		p, err := x.c.Client.CoreV1().Pods("default").Get(x.ctx, name, metav1.GetOptions{})
		return err == nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount > 0, err
	})
	if err != nil {
		t.Errorf("pod %s's container was never restarted: %v", name, err)
	}
}

func (x *escapeEnv) deletePod(t *testing.T, ns, name string) {
	t.Helper()
	if err := x.c.Client.CoreV1().Pods(ns).Delete(x.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	err := poll(x.ctx, time.Minute, func() (bool, error) {
		_, err := x.c.Client.CoreV1().Pods(ns).Get(x.ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not gone: %v", ns, name, err)
	}
}

// containerEnvRaw reads the NAME=value lines the pod printed.
func (x *escapeEnv) containerEnvRaw(name string) map[string]string {
	env := map[string]string{}
	_ = poll(x.ctx, 30*time.Second, func() (bool, error) {
		out, err := x.kubectl("logs", name)
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
				env[k] = v
			}
		}
		return err == nil && len(env) > 0, nil
	})
	return env
}

// setGPUProcesses writes the fake NVML's processes, by card index (nil: none).
func (x *escapeEnv) setGPUProcesses(t *testing.T, procs map[string][]map[string]int64) {
	t.Helper()
	writeGPUProcesses(t, x.procs, procs)
}

// writeGPUProcesses writes the fake NVML's process file at path (--fake-gpu-processes-file):
// the processes by card index (nil: none), whole, by rename.
func writeGPUProcesses(t *testing.T, path string, procs map[string][]map[string]int64) {
	t.Helper()
	if procs == nil {
		procs = map[string][]map[string]int64{}
	}
	raw, err := json.Marshal(procs)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// hostPID finds the host PID of the process named comm in the pod's first container, by the
// container ID in its cgroup.
func (x *env) hostPID(t *testing.T, pod *v1.Pod, comm string) int {
	t.Helper()
	if len(pod.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", pod.Name)
	}
	_, id, _ := strings.Cut(pod.Status.ContainerStatuses[0].ContainerID, "://")
	var found int
	err := poll(x.ctx, 30*time.Second, func() (bool, error) {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return false, err
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			c, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
			if strings.TrimSpace(string(c)) == comm && strings.Contains(string(cg), id) {
				found = pid
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no process %s in container %s: %v", comm, id, err)
	}
	return found
}

// processAlive says whether pid runs (a zombie has exited).
func processAlive(pid int) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(raw), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

func cardIndex(t *testing.T, pod *v1.Pod) int {
	t.Helper()
	i, err := strconv.Atoi(strings.Split(pod.Annotations[contract.AnnotationIndex], ",")[0])
	if err != nil {
		t.Fatalf("pod %s: GPU index %q: %v", pod.Name, pod.Annotations[contract.AnnotationIndex], err)
	}
	return i
}

// clientFor is a client with the credentials of kubeconfig.
func clientFor(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
