package dra

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// quantities compares quantities by value.
var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
func num(n int64) resourceapi.DeviceAttribute  { return resourceapi.DeviceAttribute{IntValue: &n} }

// wantDevice is mock card i as the driver must publish it on the test host (39 GiB usable,
// GiB units), with its NVLink peer, NUMA node and, unless noPCIeRoot, its PCIe root.
func wantDevice(i int, peer string, numa int64, noPCIeRoot bool) resourceapi.Device {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	d := resourceapi.Device{
		Name: deviceName(i),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"uuid": str(uuid(i)), "model": str("Mock NVIDIA A100-SXM4-40GB"), "index": num(int64(i)), "nvlinkPeers": str(peer),
			"resource.kubernetes.io/pciBusID": str(busID(i)), "resource.kubernetes.io/pcieRoot": str(pcieRoot(i)),
			"resource.kubernetes.io/numaNode": num(numa),
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse("39Gi"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: q("39Gi"),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: q("1Gi"), Max: q("39Gi"), Step: q("1Gi")}}},
			"cores": {Value: resource.MustParse("100"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: q("0"),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: q("0"), Max: q("100"), Step: q("1")}}},
		},
		AllowMultipleAllocations: ptr.To(true),
	}
	if noPCIeRoot {
		delete(d.Attributes, "resource.kubernetes.io/pcieRoot")
	}
	return d
}

// TestPublishedSlice: the node's pool is one slice of one device per card, with its
// attributes, consumable memory and cores and their request policies, in the configured order,
// republished after each prepare and unprepare.
func TestPublishedSlice(t *testing.T) {
	cards := []resourceapi.Device{wantDevice(0, "1", 0, false), wantDevice(1, "0", 0, false), wantDevice(2, "3", 1, false), wantDevice(3, "2", 1, true)}
	tests := []struct {
		name  string
		order string
		// want: the device names after start, after the claims are prepared, after the first
		// is unprepared.
		wantStart, wantPrepared, wantUnprepared []string
	}{
		{name: "index order", order: OrderIndex, wantStart: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"},
			wantPrepared: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, wantUnprepared: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}},
		{name: "most allocated first", order: OrderMostAllocated, wantStart: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"},
			wantPrepared: []string{"gpu-2", "gpu-3", "gpu-0", "gpu-1"}, wantUnprepared: []string{"gpu-3", "gpu-0", "gpu-1", "gpu-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.DeviceOrder = tt.order
			cfg.SysfsRoot = fakeSysfs(t, 4, 3) // card 3's PCIe root unknown
			td := newTestDriver(t, cfg, testHost(t))
			if err := td.publish(td.ctx); err != nil {
				t.Fatal(err)
			}
			got := td.pub.devices(t)
			if diff := cmp.Diff(cards, byName(got), quantities); diff != "" {
				t.Errorf("devices (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStart, names(got)); diff != "" {
				t.Errorf("order at start (-want,+got):\n%s", diff)
			}
			big, small := makeClaim("big").device("gpu-2", 8*gib, 0).obj(), makeClaim("small").device("gpu-3", 4*gib, 0).obj()
			td.mustPrepare(t, big, small)
			if diff := cmp.Diff(tt.wantPrepared, names(td.pub.devices(t))); diff != "" {
				t.Errorf("order after prepare (-want,+got):\n%s", diff)
			}
			unprepare(t, td, big)
			if diff := cmp.Diff(tt.wantUnprepared, names(td.pub.devices(t))); diff != "" {
				t.Errorf("order after unprepare (-want,+got):\n%s", diff)
			}
		})
	}
}

// byName sorts devices by name, so that their content is compared apart from their order.
func byName(devs []resourceapi.Device) []resourceapi.Device {
	out := make([]resourceapi.Device, len(devs))
	for _, d := range devs {
		out[int(*d.Attributes[AttrIndex].IntValue)] = d
	}
	return out
}

func TestMemoryCapacity(t *testing.T) {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	tests := []struct {
		name           string
		capacity, unit int64
		want           resourceapi.CapacityRequestPolicyRange
	}{
		{name: "GiB units", capacity: 39 * gib, unit: gib, want: resourceapi.CapacityRequestPolicyRange{Min: q("1Gi"), Max: q("39Gi"), Step: q("1Gi")}},
		{name: "MiB units", capacity: 39998 * mib, unit: mib, want: resourceapi.CapacityRequestPolicyRange{Min: q("1Mi"), Max: q("39998Mi"), Step: q("1Mi")}},
		{name: "a card of two units", capacity: 2 * gib, unit: gib, want: resourceapi.CapacityRequestPolicyRange{Min: q("1Gi"), Max: q("2Gi"), Step: q("1Gi")}},
		// min + step must not exceed the capacity (kube-apiserver's validation)
		{name: "a card of one unit has no step", capacity: gib, unit: gib, want: resourceapi.CapacityRequestPolicyRange{Min: q("1Gi"), Max: q("1Gi")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := memoryCapacity(tt.capacity, tt.unit)
			if got.Value.Value() != tt.capacity || got.RequestPolicy.Default.Value() != tt.capacity {
				t.Errorf("value %s default %s, want %d bytes each", got.Value.String(), got.RequestPolicy.Default.String(), tt.capacity)
			}
			if diff := cmp.Diff(&tt.want, got.RequestPolicy.ValidRange, quantities); diff != "" {
				t.Errorf("valid range (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSliceThroughController: what the driver publishes becomes the node's ResourceSlice
// through the resourceslice controller that kubeletplugin runs (here over a fake clientset).
func TestSliceThroughController(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.DeviceOrder = OrderMostAllocated
	td := newTestDriver(t, cfg, testHost(t))
	td.mustPrepare(t, makeClaim("c").device("gpu-1", 8*gib, 0).obj())
	client := k8sfake.NewClientset()
	_, ctx := ktesting.NewTestContext(t)
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{DriverName: cfg.DriverName, KubeClient: client,
		Owner: &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: testNode, UID: "node-uid"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Stop()
	td.setPublisher(controllerPublisher{ctrl})
	if err := td.publish(td.ctx); err != nil {
		t.Fatal(err)
	}
	var slice resourceapi.ResourceSlice
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		slice = list.Items[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("no ResourceSlice: %v", err)
	}
	got := []string{slice.Spec.Driver, slice.Spec.Pool.Name, ptr.Deref(slice.Spec.NodeName, "")}
	got = append(got, names(slice.Spec.Devices)...)
	if diff := cmp.Diff([]string{"gpushare.aliyun.com", testNode, testNode, "gpu-1", "gpu-0", "gpu-2", "gpu-3"}, got); diff != "" {
		t.Errorf("driver, pool, node and devices (-want,+got):\n%s", diff)
	}
}

// controllerPublisher publishes through a resourceslice controller, as kubeletplugin.Helper.
type controllerPublisher struct{ c *resourceslice.Controller }

func (p controllerPublisher) PublishResources(_ context.Context, res resourceslice.DriverResources) error {
	p.c.Update(&res)
	return nil
}

// TestDeviceClassSelects: the shipped DeviceClass's selector, compiled by the scheduler's CEL
// library, selects every device the driver publishes and no other driver's; a model selector
// as a claim writes it reads the published model.
func TestDeviceClassSelects(t *testing.T) {
	raw, err := os.ReadFile("../../config/dra/deviceclass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var class resourceapi.DeviceClass
	if err := yaml.UnmarshalStrict(raw, &class); err != nil {
		t.Fatal(err)
	}
	if len(class.Spec.Selectors) != 1 || class.Spec.Selectors[0].CEL == nil {
		t.Fatalf("selectors %+v: want one CEL selector", class.Spec.Selectors)
	}
	cfg := testConfig(t, t.TempDir())
	td := newTestDriver(t, cfg, testHost(t))
	if err := td.publish(td.ctx); err != nil {
		t.Fatal(err)
	}
	published := td.pub.devices(t)
	compiler := cel.GetCompiler(cel.Features{EnableConsumableCapacity: true})
	for _, tt := range []struct {
		name, expr, driver string
		want               bool
	}{
		{name: "the class, our driver", expr: class.Spec.Selectors[0].CEL.Expression, driver: cfg.DriverName, want: true},
		{name: "the class, another driver", expr: class.Spec.Selectors[0].CEL.Expression, driver: "gpu.nvidia.com", want: false},
		{name: "a model selector", expr: `device.attributes["gpushare.aliyun.com"].model.matches("A100")`, driver: cfg.DriverName, want: true},
		{name: "a memory selector", expr: `device.capacity["gpushare.aliyun.com"].memory.compareTo(quantity("32Gi")) >= 0`, driver: cfg.DriverName, want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prog := compiler.CompileCELExpression(tt.expr, cel.Options{})
			if prog.Error != nil {
				t.Fatal(prog.Error)
			}
			for _, d := range published {
				got, _, err := prog.DeviceMatches(td.ctx, cel.Device{Driver: tt.driver, Attributes: d.Attributes, Capacity: d.Capacity,
					AllowMultipleAllocations: d.AllowMultipleAllocations})
				if err != nil || got != tt.want {
					t.Errorf("%s on %s = %v, %v; want %v", strings.TrimSpace(tt.expr), d.Name, got, err, tt.want)
				}
			}
		})
	}
}
