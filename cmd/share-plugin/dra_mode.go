package main

import (
	"context"
	"flag"
	"path/filepath"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/dra"
)

// --mode values.
const (
	// modeDevicePlugin serves aliyun.com/gpu-mem through a kubelet device plugin (the default).
	modeDevicePlugin = "device-plugin"
	// modeDRA serves the GPUs through a DRA driver (package dra).
	modeDRA = "dra"
)

// draOptions are the flags of DRA mode.
type draOptions struct {
	driverName  string
	cdiRoot     string
	pluginsDir  string
	registryDir string
	deviceOrder string
}

func newDRAOptions() draOptions {
	c := dra.DefaultConfig()
	return draOptions{driverName: c.DriverName, cdiRoot: c.CDIRoot, pluginsDir: c.PluginsDir, registryDir: c.RegistryDir, deviceOrder: c.DeviceOrder}
}

func (d *draOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&d.driverName, "driver-name", d.driverName, "DRA driver name (--mode=dra): the domain of the devices' attributes and capacities, the DeviceClass's selector and the CDI vendor; device-plugin mode refuses a node where this driver runs")
	fs.StringVar(&d.cdiRoot, "cdi-root", d.cdiRoot, "folder the container runtime reads CDI specs from; DRA mode writes one per prepared claim (--mode=dra)")
	fs.StringVar(&d.pluginsDir, "kubelet-plugins-dir", d.pluginsDir, "kubelet's plugins folder: the DRA driver's socket goes in <dir>/<driver name> (--mode=dra)")
	fs.StringVar(&d.registryDir, "kubelet-registry-dir", d.registryDir, "kubelet's plugin registration folder, where the DRA driver registers (--mode=dra) and where device-plugin mode looks for it")
	fs.StringVar(&d.deviceOrder, "dra-device-order", d.deviceOrder, "order the GPUs are published in, which kube-scheduler's allocator tries first-fit (--mode=dra): "+strings.Join(dra.OrderNames(), " or "))
}

// draConfig is DRA mode's configuration from the flags, shared ones included (unit, reserve,
// health, memory limit, sysfs).
func (o *options) draConfig() dra.Config {
	c := dra.DefaultConfig()
	c.DriverName, c.NodeName, c.Names, c.ReserveMemory = o.dra.driverName, o.nodeName, o.names, o.reserveMemory
	c.CDIRoot, c.PluginsDir, c.RegistryDir, c.SysfsRoot = o.dra.cdiRoot, o.dra.pluginsDir, o.dra.registryDir, o.sysfsRoot
	c.DeviceOrder, c.HealthCheck, c.IgnoredXIDs, c.Enforce = o.dra.deviceOrder, o.healthCheck, o.ignoredXIDs, o.memoryLimit
	return c
}

// runDRA serves the DRA driver, unless the device plugin runs on the node, and reads and
// polices GPU usage as device-plugin mode does, each container's share read from the claims
// the driver prepared for it.
func runDRA(ctx context.Context, o *options, nv nvml.Interface, client kubernetes.Interface) error {
	if err := dra.CheckNoDevicePlugin(ctx, filepath.Join(o.kubeletDir, o.socketName)); err != nil {
		return err
	}
	d, err := dra.New(ctx, nv, client, o.draConfig())
	if err != nil {
		return err
	}
	if mode, _ := d.MemoryLimit(); usageNeeded(o, mode) {
		pods := deviceplugin.NewInformerPodSource(client, o.nodeName)
		go func() {
			if err := pods.Run(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Pod informer stopped: GPU usage is not attributed to containers")
			}
		}()
		if err := startUsage(ctx, o, nv, pods, d, client, mode); err != nil {
			return err
		}
	}
	return d.Run(ctx)
}
