package framework

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// FakeDRADriver is the smallest DRA kubelet plugin the real node's infrastructure tests need,
// before gpushare's own (share-plugin --mode=dra) runs there: it registers with the node's
// kubelet, publishes named devices without attributes in one ResourceSlice for the node, and
// prepares each claim by naming, for every device allocated from it, the CDI device
// "<cdiKind>=<device name>", whose spec the test writes (RealNode.WriteCDISpec). It records
// the UIDs of the claims it prepared and unprepared.
type FakeDRADriver struct {
	helper *kubeletplugin.Helper
	plugin *fakeDRAPlugin
}

// fakeDRAPlugin answers the kubelet's calls (kubeletplugin.DRAPlugin).
type fakeDRAPlugin struct {
	driver  string
	cdiKind string
	logf    func(format string, args ...any)

	mu         sync.Mutex // guards prepared and unprepared
	prepared   []types.UID
	unprepared []types.UID
}

var _ kubeletplugin.DRAPlugin = (*fakeDRAPlugin)(nil)

// StartFakeDRADriver starts driver (a DNS subdomain) on the node with devices, and waits until
// the kubelet has accepted its registration.
func (n *RealNode) StartFakeDRADriver(ctx context.Context, driver, cdiKind string, devices ...string) (*FakeDRADriver, error) {
	dataDir := n.PluginDataDir(driver)
	for _, d := range []string{n.PluginRegistryDir(), dataDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("DRA driver %s: %w", driver, err)
		}
	}
	p := &fakeDRAPlugin{driver: driver, cdiKind: cdiKind, logf: n.c.Logf}
	h, err := kubeletplugin.Start(ctx, p,
		kubeletplugin.DriverName(driver), kubeletplugin.KubeClient(n.c.Client), kubeletplugin.NodeName(RealNodeName),
		kubeletplugin.RegistrarDirectoryPath(n.PluginRegistryDir()), kubeletplugin.PluginDataDirectoryPath(dataDir),
		kubeletplugin.HealthService(false))
	if err != nil {
		return nil, fmt.Errorf("start DRA driver %s: %w", driver, err)
	}
	d := &FakeDRADriver{helper: h, plugin: p}
	if err := d.publish(ctx, devices); err != nil {
		d.Stop()
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = WaitFor(wctx, 100*time.Millisecond, "kubelet registration of DRA driver "+driver, func() (bool, error) {
		st := h.RegistrationStatus()
		if st != nil && !st.PluginRegistered {
			return false, fmt.Errorf("kubelet refused: %s", st.Error)
		}
		return st != nil, nil
	})
	if err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// publish hands the helper's ResourceSlice controller one pool, named after the node, with one
// slice of devices; the controller creates the slice and keeps it, recreating it when the
// kubelet wipes the node's slices at start.
func (d *FakeDRADriver) publish(ctx context.Context, devices []string) error {
	devs := make([]resourceapi.Device, 0, len(devices))
	for _, name := range devices {
		devs = append(devs, resourceapi.Device{Name: name})
	}
	res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		RealNodeName: {Slices: []resourceslice.Slice{{Devices: devs}}},
	}}
	if err := d.helper.PublishResources(ctx, res); err != nil {
		return fmt.Errorf("publish devices of DRA driver %s: %w", d.plugin.driver, err)
	}
	return nil
}

// Stop unregisters the driver from the kubelet and stops publishing its devices.
func (d *FakeDRADriver) Stop() { d.helper.Stop() }

// Prepared returns the UIDs of the claims the kubelet had the driver prepare, in call order.
func (d *FakeDRADriver) Prepared() []types.UID {
	d.plugin.mu.Lock()
	defer d.plugin.mu.Unlock()
	return slices.Clone(d.plugin.prepared)
}

// Unprepared returns the UIDs of the claims the kubelet had the driver unprepare, in call order.
func (d *FakeDRADriver) Unprepared() []types.UID {
	d.plugin.mu.Lock()
	defer d.plugin.mu.Unlock()
	return slices.Clone(d.plugin.unprepared)
}

// PrepareResourceClaims names, per claim, one CDI device per device allocated by this driver.
func (p *fakeDRAPlugin) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		var res kubeletplugin.PrepareResult
		if claim.Status.Allocation == nil {
			res.Err = fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
		} else {
			for _, r := range claim.Status.Allocation.Devices.Results {
				if r.Driver != p.driver {
					continue
				}
				res.Devices = append(res.Devices, kubeletplugin.Device{
					Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
					CDIDeviceIDs: []string{p.cdiKind + "=" + r.Device},
				})
			}
		}
		p.logf("DRA driver %s: prepare claim %s/%s: %+v", p.driver, claim.Namespace, claim.Name, res)
		out[claim.UID] = res
		p.mu.Lock()
		p.prepared = append(p.prepared, claim.UID)
		p.mu.Unlock()
	}
	return out, nil
}

// UnprepareResourceClaims records the claims; the driver made nothing on the host to undo.
func (p *fakeDRAPlugin) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range claims {
		p.logf("DRA driver %s: unprepare claim %s", p.driver, c)
		p.unprepared = append(p.unprepared, c.UID)
		out[c.UID] = nil
	}
	return out, nil
}

// HandleError prints the helper's background errors (ResourceSlice publishing, gRPC serving)
// to the test's log.
func (p *fakeDRAPlugin) HandleError(_ context.Context, err error, msg string) {
	p.logf("DRA driver %s: %s: %v", p.driver, msg, err)
}

// WatchHealthStatus: the fake driver reports no device health (the service is off anyway).
func (p *fakeDRAPlugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
