package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/dra"
)

// DRA mode's shipped names (config/dra): the DaemonSet that runs share-plugin --mode=dra, its
// container and its service account (kube-system, config/dra/rbac.yaml).
const (
	draDaemonSetFile = "config/dra/daemonset.yaml"
	draContainer     = "share-plugin"
	draAccount       = "gpushare-dra-driver"
)

// DRADaemonSetArgs returns the args of the share-plugin container of the shipped DRA
// DaemonSet (config/dra/daemonset.yaml under root): the mode, unit, device order and memory
// limit an operator's nodes run with.
func DRADaemonSetArgs(root string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(root, draDaemonSetFile))
	if err != nil {
		return nil, fmt.Errorf("DRA DaemonSet: %w", err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(raw, &ds); err != nil {
		return nil, fmt.Errorf("DRA DaemonSet %s: %w", draDaemonSetFile, err)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == draContainer {
			return slices.Clone(c.Args), nil
		}
	}
	return nil, fmt.Errorf("DRA DaemonSet %s has no container %q", draDaemonSetFile, draContainer)
}

// StartDRASharePlugin starts share-plugin (built with the fakenvml tag) in DRA mode for the
// real node, as the DRA DaemonSet's pod would run: with the DaemonSet's args, acting as its
// service account (config/dra/rbac.yaml must be applied first, see InstallDRA), registered
// with the node's kubelet (its plugins and registration folders under the kubelet's
// --root-dir) and writing its CDI specs where the node's containerd reads them. Its sysfs root
// is an empty folder: the mocked cards' PCI addresses are not this machine's, so their PCIe
// root and NUMA node stay unknown rather than read from whatever device sits there. It reads
// this machine's /proc (the DaemonSet's hostPID pod sees the host's at /host/proc) and serves
// its metrics at c.PluginMetricsURL. extra come last and override the shipped args: the fake
// GPUs, and the HAMi-core paths of this machine.
func (n *RealNode) StartDRASharePlugin(bin string, extra ...string) error {
	args, err := DRADaemonSetArgs(n.c.Root)
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	n.c.PluginMetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	user, groups := ServiceAccountUser("kube-system", draAccount)
	kc, err := n.c.KubeconfigAs(user, groups, map[string][]string{"authentication.kubernetes.io/node-name": {RealNodeName}})
	if err != nil {
		return err
	}
	args = append(args, "--kubeconfig="+kc, "--node-name="+RealNodeName, "--cdi-root="+n.CDISpecDir(),
		"--kubelet-plugins-dir="+filepath.Dir(n.PluginDataDir(dra.DefaultDriverName)), "--kubelet-registry-dir="+n.PluginRegistryDir(),
		"--kubelet-dir="+DevicePluginDir, "--sysfs-root="+filepath.Join(n.c.Dir, "no-sysfs"),
		"--host-proc=/proc", fmt.Sprintf("--metrics-address=127.0.0.1:%d", port))
	_, err = n.c.start("share-plugin", bin, append(args, extra...), "NODE_NAME="+RealNodeName)
	return err
}

// WaitDRADevices waits until the DRA driver of share-plugin publishes the node's pool with
// count devices and has put its registration socket in the kubelet's registry folder, and
// returns the devices as published.
func (n *RealNode) WaitDRADevices(ctx context.Context, count int, timeout time.Duration) ([]resourceapi.Device, error) {
	var devices []resourceapi.Device
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reg := filepath.Join(n.PluginRegistryDir(), dra.DefaultDriverName+"-reg.sock")
	err := WaitFor(ctx, 200*time.Millisecond, "DRA devices of node "+RealNodeName, func() (bool, error) {
		if p := n.c.Proc("share-plugin"); p != nil && p.Exited() {
			return false, fmt.Errorf("share-plugin exited:\n%s", p.Tail(20))
		}
		var err error
		if devices, err = n.c.DRADevices(ctx, RealNodeName); err != nil {
			return false, err
		}
		if len(devices) != count {
			return false, fmt.Errorf("%d devices published, want %d", len(devices), count)
		}
		_, err = os.Stat(reg)
		return err == nil, err
	})
	return devices, err
}

// DRADevices returns the devices gpushare's DRA driver publishes for node, in the order of its
// ResourceSlices (by name) and of the devices in each: the order kube-scheduler's allocator
// tries them.
func (c *Cluster) DRADevices(ctx context.Context, node string) ([]resourceapi.Device, error) {
	list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b resourceapi.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	var out []resourceapi.Device
	for _, s := range list.Items {
		if s.Spec.Driver == dra.DefaultDriverName && s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			out = append(out, s.Spec.Devices...)
		}
	}
	return out, nil
}

// DRAAttribute returns a device's string or int attribute in the driver's domain as a string
// ("" when absent).
func DRAAttribute(d *resourceapi.Device, name resourceapi.QualifiedName) string {
	a, ok := d.Attributes[name]
	if !ok {
		a, ok = d.Attributes[resourceapi.QualifiedName(dra.DefaultDriverName+"/"+string(name))]
	}
	switch {
	case !ok:
		return ""
	case a.StringValue != nil:
		return *a.StringValue
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue)
	}
	return ""
}
