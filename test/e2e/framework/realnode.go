package framework

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Real-node constants: the kubelet's device-plugin folder is hard-coded in kubelet, so only
// one real node (or device-manager test) may run on a machine at a time.
const (
	DevicePluginDir = "/var/lib/kubelet/device-plugins"
	// RealNodeName is the real kubelet's node name: the apiserver reaches it by name on
	// 127.0.0.1 (--kubelet-preferred-address-types=Hostname), so logs and exec work.
	RealNodeName = "localhost"
	// LocalImage is the image built from busybox-static and our pause; it is also the sandbox image.
	LocalImage = "localhost/gpushare/e2e:1"
)

// NodeTools are the host programs a real node needs (Debian: containerd runc busybox-static).
var NodeTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "busybox"}

// MissingNodeTools lists the host programs of NodeTools not on PATH.
func MissingNodeTools() []string {
	var missing []string
	for _, t := range NodeTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	return missing
}

// InstallNodeTools installs containerd, runc and busybox-static with apt-get (root only).
func InstallNodeTools() error {
	if len(MissingNodeTools()) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root: cannot apt-get install containerd runc busybox-static")
	}
	for _, args := range [][]string{
		{"update"},
		{"install", "-y", "--no-install-recommends", "containerd", "runc", "busybox-static"},
	} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	if m := MissingNodeTools(); len(m) > 0 {
		return fmt.Errorf("still missing after apt-get: %v", m)
	}
	return nil
}

// RealNode is containerd + a real kubelet registering node "localhost".
type RealNode struct {
	c          *Cluster
	ctrdDir    string
	socket     string
	kubeletDir string
	pause      string // our cmd/pause binary, in every local image
}

// StartRealNode starts containerd (own root, state and socket under the cluster folder),
// imports the local image (pause is our cmd/pause binary) and starts the kubelet, which
// registers its node with taints (e.g. "key=value:NoSchedule").
func (c *Cluster) StartRealNode(ctx context.Context, pause string, taints ...string) (*RealNode, error) {
	return c.StartRealNodeWith(ctx, pause, RealNodeOptions{Taints: taints})
}

// StartRealNodeWith is StartRealNode shaped by o (taints, kubelet configuration, NUMA nodes).
func (c *Cluster) StartRealNodeWith(ctx context.Context, pause string, o RealNodeOptions) (*RealNode, error) {
	n := &RealNode{c: c, ctrdDir: filepath.Join(c.Dir, "ctrd"), kubeletDir: filepath.Join(c.Dir, "kubelet")}
	n.socket = filepath.Join(n.ctrdDir, "containerd.sock")
	if err := n.startContainerd(ctx, o); err != nil {
		return n, err
	}
	if err := n.importImage(pause); err != nil {
		return n, err
	}
	if err := n.startKubelet(o); err != nil {
		return n, err
	}
	return n, n.waitKubelet(ctx)
}

// waitKubelet waits until the kubelet serves its device-plugin registration socket and has
// registered its Node, as a DaemonSet's plugin would find it.
func (n *RealNode) waitKubelet(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	err := WaitFor(ctx, 200*time.Millisecond, "kubelet registered", func() (bool, error) {
		if p := n.c.Proc("kubelet"); p != nil && p.Exited() {
			return false, fmt.Errorf("kubelet exited")
		}
		if _, err := os.Stat(filepath.Join(DevicePluginDir, "kubelet.sock")); err != nil {
			return false, err
		}
		_, err := n.c.Client.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("%w\nkubelet log:\n%s", err, TailFile(filepath.Join(n.c.Dir, "kubelet.log"), 30))
	}
	return nil
}

func (n *RealNode) startContainerd(ctx context.Context, o RealNodeOptions) error {
	if err := os.MkdirAll(filepath.Join(n.ctrdDir, "cni"), 0o755); err != nil {
		return err
	}
	bin, cfg := "containerd", containerdV1Config(n.ctrdDir, n.socket)
	if o.ContainerdV2 {
		var err error
		if bin, cfg, err = n.containerdV2(); err != nil {
			return err
		}
	}
	path := filepath.Join(n.ctrdDir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	if _, err := n.c.start("containerd", bin, []string{"--config=" + path}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return WaitFor(ctx, 100*time.Millisecond, "containerd socket", func() (bool, error) {
		return n.ctr("version") == nil, nil
	})
}

// containerdV1Config is the configuration (version 2) of the host's containerd v1.6.
// restrict_oom_score_adj: this VM forbids lowering oom_score_adj, which every sandbox asks.
// The CNI folder stays empty: no pod network, hostNetwork pods only.
func containerdV1Config(ctrdDir, socket string) string {
	return fmt.Sprintf(`version = 2
root = "%[1]s/root"
state = "%[1]s/state"
[grpc]
  address = "%[2]s"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[3]s"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    conf_dir = "%[1]s/cni"
`, ctrdDir, socket, LocalImage)
}

func (n *RealNode) ctr(args ...string) error {
	cmd := exec.Command("ctr", append([]string{"--address", n.socket, "-n", "k8s.io"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (n *RealNode) ctrOutput(args ...string) string {
	out, _ := exec.Command("ctr", append([]string{"--address", n.socket, "-n", "k8s.io"}, args...)...).Output()
	return string(out)
}

func (n *RealNode) importImage(pause string) error {
	n.pause = pause
	return n.ImportBusyboxImage(LocalImage, nil)
}

// ImportBusyboxImage imports into the node's containerd an image named name that holds what
// LocalImage holds (busybox-static with sh and a few applets, our pause) and extra files, by
// their path in the image (e.g. a symlink at etc/ld.so.preload).
func (n *RealNode) ImportBusyboxImage(name string, extra map[string]ImageFile) error {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return err
	}
	files := map[string]ImageFile{"bin/busybox": {Src: busybox}, "pause": {Src: n.pause}}
	for _, a := range []string{"sh", "env", "sleep", "cat", "ls", "echo", "grep", "sort"} {
		files["bin/"+a] = ImageFile{Link: "busybox"}
	}
	maps.Copy(files, extra)
	tarPath := filepath.Join(n.c.Dir, "image-"+strings.NewReplacer("/", "-", ":", "-").Replace(name)+".tar")
	if err := WriteOCIImage(tarPath, name, files, []string{"/pause"}); err != nil {
		return err
	}
	return n.ctr("images", "import", tarPath)
}

// ImportImage imports an image tarball (docker save or OCI layout, e.g. `make images`) into
// the node's containerd, where the kubelet finds it without a registry.
func (n *RealNode) ImportImage(tarball string) error {
	return n.ctr("images", "import", tarball)
}

// PodResourcesDir is the folder of the kubelet's pod-resources socket (under its --root-dir,
// not /var/lib/kubelet).
func (n *RealNode) PodResourcesDir() string {
	return filepath.Join(n.kubeletDir, "root", "pod-resources")
}

func (n *RealNode) startKubelet(o RealNodeOptions) error {
	for _, d := range []string{"root", "pki"} {
		if err := os.MkdirAll(filepath.Join(n.kubeletDir, d), 0o755); err != nil {
			return err
		}
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	healthz, err := FreePort()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
registerNode: true
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, port, healthz, n.socket) + o.KubeletConfig
	path := filepath.Join(n.kubeletDir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	args := []string{
		"--config=" + path, "--kubeconfig=" + n.c.Kubeconfig,
		"--root-dir=" + filepath.Join(n.kubeletDir, "root"), "--cert-dir=" + filepath.Join(n.kubeletDir, "pki"),
		"--hostname-override=" + RealNodeName, "--v=1",
	}
	if len(o.Taints) > 0 {
		args = append(args, "--register-with-taints="+strings.Join(o.Taints, ","))
	}
	bin := filepath.Join(n.c.Bin, "kubelet")
	if o.TwoNUMANodes {
		if bin, args, err = n.withTwoNUMANodes(bin, args); err != nil {
			return err
		}
	}
	_, err = n.c.start("kubelet", bin, args)
	return err
}

// Stop tears the node down in the order that leaves nothing behind: pods deleted (the kubelet
// stops their containers), kubelet stopped, leftover sandboxes removed, containerd stopped,
// the kubelet's and containerd's mounts undone, the device-plugin folder removed.
func (n *RealNode) Stop(ctx context.Context) {
	cs := n.c.Client
	if cs != nil {
		_ = cs.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
			metav1.ListOptions{FieldSelector: "spec.nodeName=" + RealNodeName})
		ctx2, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = WaitFor(ctx2, 250*time.Millisecond, "pods gone", func() (bool, error) {
			l, err := cs.CoreV1().Pods("default").List(ctx2, metav1.ListOptions{FieldSelector: "spec.nodeName=" + RealNodeName})
			return err == nil && len(l.Items) == 0, err
		})
		cancel()
	}
	for _, name := range []string{"share-plugin", "kubelet"} {
		if p := n.c.Proc(name); p != nil {
			p.Stop(10 * time.Second)
		}
	}
	n.cleanupContainers()
	if p := n.c.Proc("containerd"); p != nil {
		p.Stop(10 * time.Second)
	}
	unmountUnder(filepath.Join(n.kubeletDir, "root"))
	unmountUnder(n.ctrdDir) // the sandboxes' /dev/shm mounts in containerd's state folder
	_ = os.RemoveAll(DevicePluginDir)
}

func (n *RealNode) cleanupContainers() {
	for _, id := range strings.Fields(n.ctrOutput("containers", "ls", "-q")) {
		_ = n.ctr("tasks", "kill", "-s", "KILL", id)
		time.Sleep(200 * time.Millisecond)
		_ = n.ctr("tasks", "rm", "-f", id)
		_ = n.ctr("containers", "rm", id)
	}
}

// UnmountUnder unmounts every mount at or below dir, deepest first (e.g. the share-plugin's
// per-container tmpfs counter folders, left by pods still running when a test ends).
func UnmountUnder(dir string) { unmountUnder(dir) }

// unmountUnder unmounts every mount at or below dir, deepest first.
func unmountUnder(dir string) {
	raw, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			points = append(points, f[1])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// ContainerdSocket is the node's containerd socket.
func (n *RealNode) ContainerdSocket() string { return n.socket }

// PodResourcesSocket is the kubelet's PodResources API socket (under its --root-dir).
func (n *RealNode) PodResourcesSocket() string {
	return filepath.Join(n.PodResourcesDir(), "kubelet.sock")
}

// StartSharePlugin starts share-plugin (built with the fakenvml tag) for node, talking to the
// kubelet through DevicePluginDir and serving its metrics at c.PluginMetricsURL; extra are
// more flags (e.g. the mocked GPUs).
func (c *Cluster) StartSharePlugin(bin, node string, extra ...string) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.PluginMetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	args := append(sharePluginArgs(c.Kubeconfig, node), "--metrics-address="+strings.TrimSuffix(strings.TrimPrefix(c.PluginMetricsURL, "http://"), "/metrics"))
	_, err = c.start("share-plugin", bin, append(args, extra...), "NODE_NAME="+node)
	return err
}

// WaitNodeGPUs waits until share-plugin has published node's GPUs and the kubelet advertises
// gpu-mem, then removes the admission's not-ready taint (without CNI the real node stays
// NotReady, which only matters through that taint). It returns the published cards.
func (c *Cluster) WaitNodeGPUs(ctx context.Context, node string, timeout time.Duration) ([]contract.GPU, error) {
	names := contract.DefaultNames()
	var gpus []contract.GPU
	ctx2, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := WaitFor(ctx2, 200*time.Millisecond, "GPUs of node "+node, func() (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx2, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := n.Status.Allocatable[names.Resource]
		if q.Value() == 0 || n.Annotations[names.NodeGPUsAnnotation] == "" {
			return false, fmt.Errorf("allocatable %s=%s, annotation %q", names.Resource, q.String(), n.Annotations[names.NodeGPUsAnnotation])
		}
		gpus, err = contract.DecodeGPUs(n.Annotations[names.NodeGPUsAnnotation])
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	return gpus, c.RemoveNotReadyTaint(ctx, node)
}

// SharedHostDir makes dir (created if missing) a mount point of its own with shared
// propagation, as every folder is on a host whose / is shared (systemd's default), and returns
// the function that undoes it. The share-plugin's DaemonSet mounts its state folder with
// mountPropagation: Bidirectional, which containerd refuses on a private mount (this machine's
// /): "path ... is mounted on / but it is not a shared mount".
func SharedHostDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("bind %s: %w", dir, err)
	}
	undo := func() { unmountUnder(dir) }
	if err := syscall.Mount("", dir, "", syscall.MS_SHARED, ""); err != nil {
		undo()
		return nil, fmt.Errorf("make %s shared: %w", dir, err)
	}
	return undo, nil
}
