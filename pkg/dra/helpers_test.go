package dra

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
	"github.com/gpushare/gpushare/pkg/enforce"
	enforcefake "github.com/gpushare/gpushare/pkg/enforce/fake"
)

const (
	testNode   = "n1"
	driverName = DefaultDriverName
	gib        = int64(1) << 30
	mib        = int64(1) << 20
)

// The mock host: 4 cards of 40 GiB, of which the driver reserves 450 MiB, and the operator
// holds back 512 MiB more (--reserve-memory): 39,998 MiB usable, 39 whole GiB.
const (
	testCardBytes     = 40 * gib
	testDriverReserve = 450 * mib
	testReserve       = 512 * mib
	testCapacity      = 39 * gib
)

// testHost is a 4-card mock host (dgxa100's first cards, joined by NVLink in pairs).
func testHost(t *testing.T) *mockhost.Host {
	t.Helper()
	h, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 4, MemoryBytes: uint64(testCardBytes), ReservedBytes: uint64(testDriverReserve),
		Links: mockhost.LinksPairs})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// busID is the PCI address of mock card i as the driver reads it.
func busID(i int) string { return nvml.NormalizeBusID(mockhost.BusID(i)) }

// pcieRoot is the root complex the fake sysfs puts mock card i under: cards 0 and 1 under
// pci0000:00, 2 and 3 under pci0000:80.
func pcieRoot(i int) string { return fmt.Sprintf("pci0000:%02x", 0x80*(i/2)) }

// fakeSysfs builds a sysfs with the mock cards' PCI devices (a link per card from
// bus/pci/devices to its folder under its root complex), leaving out card skip.
func fakeSysfs(t *testing.T, cards, skip int) string {
	t.Helper()
	root := t.TempDir()
	for i := range cards {
		if i == skip {
			continue
		}
		bdf := busID(i)
		rel := filepath.Join("devices", pcieRoot(i), pcieRoot(i)[3:]+":01.0", bdf)
		mkdir(t, filepath.Join(root, rel))
		mkdir(t, filepath.Join(root, "bus", "pci", "devices"))
		if err := os.Symlink(filepath.Join("..", "..", "..", rel), filepath.Join(root, "bus", "pci", "devices", bdf)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// hamiCoreConfig is HAMi-core with a library the backend accepts, under dir, counter folders
// bounded by counterSize.
func hamiCoreConfig(t *testing.T, dir string, counterSize int64) enforce.Config {
	t.Helper()
	lib := filepath.Join(dir, "lib", "libvgpu.so")
	mkdir(t, filepath.Dir(lib))
	machine, known := enforce.HostELFMachine()
	if !known {
		machine = elf.EM_X86_64 // not checked where the machine is unknown
	}
	if err := enforcefake.WriteELF(lib, elf.ET_DYN, machine); err != nil {
		t.Fatal(err)
	}
	return enforce.Config{Mode: enforce.ModeHAMiCore, Library: lib, StateDir: filepath.Join(dir, "state"),
		CollectAfter: enforce.DefaultCollectAfter, CounterSize: counterSize}
}

// testConfig is the driver on the mock host with HAMi-core, its files under dir.
func testConfig(t *testing.T, dir string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeName, cfg.ReserveMemory = testNode, testReserve
	cfg.CDIRoot, cfg.PluginsDir, cfg.RegistryDir = filepath.Join(dir, "cdi"), filepath.Join(dir, "plugins"), filepath.Join(dir, "registry")
	cfg.SysfsRoot = fakeSysfs(t, 4, -1)
	cfg.Enforce = hamiCoreConfig(t, dir, enforce.DefaultCounterSize)
	return cfg
}

// testDriver is a driver over the mock host, a fake clientset, a fake mounter and a recording
// publisher.
type testDriver struct {
	*Driver
	ctx     context.Context
	host    *mockhost.Host
	client  *k8sfake.Clientset
	mounter *enforcefake.Mounter
	pub     *recorder
}

func newTestDriver(t *testing.T, cfg Config, host *mockhost.Host) *testDriver {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	td := &testDriver{ctx: ctx, host: host, client: k8sfake.NewClientset(), mounter: &enforcefake.Mounter{}, pub: &recorder{}}
	d, err := New(ctx, nvml.New(host), td.client, cfg, WithMounter(td.mounter))
	if err != nil {
		t.Fatal(err)
	}
	if mode, reason := d.MemoryLimit(); cfg.Enforce.Mode == enforce.ModeHAMiCore && mode != enforce.ModeHAMiCore {
		t.Fatalf("memory limit %s (%s), want %s", mode, reason, enforce.ModeHAMiCore)
	}
	d.setPublisher(td.pub)
	td.Driver = d
	return td
}

// prepare prepares claims and fails the test on an overall error.
func (td *testDriver) prepare(t *testing.T, claims ...*resourceapi.ResourceClaim) map[types.UID]error {
	t.Helper()
	res, err := td.PrepareResourceClaims(td.ctx, claims)
	if err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]error{}
	for uid, r := range res {
		out[uid] = r.Err
	}
	return out
}

// mustPrepare prepares claims, each of which must succeed.
func (td *testDriver) mustPrepare(t *testing.T, claims ...*resourceapi.ResourceClaim) {
	t.Helper()
	for uid, err := range td.prepare(t, claims...) {
		if err != nil {
			t.Fatalf("claim %s: %v", uid, err)
		}
	}
}

// recorder is a Publisher that keeps every publication.
type recorder struct {
	mu   sync.Mutex
	pubs []resourceslice.DriverResources
}

func (r *recorder) PublishResources(_ context.Context, res resourceslice.DriverResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pubs = append(r.pubs, *res.DeepCopy())
	return nil
}

// devices are the last publication's devices of the node's pool.
func (r *recorder) devices(t *testing.T) []resourceapi.Device {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pubs) == 0 {
		t.Fatal("nothing published")
	}
	pool, ok := r.pubs[len(r.pubs)-1].Pools[testNode]
	if !ok || len(pool.Slices) != 1 {
		t.Fatalf("last publication %+v: want one slice in pool %s", r.pubs[len(r.pubs)-1], testNode)
	}
	return pool.Slices[0].Devices
}

// names lists device names in order.
func names(devs []resourceapi.Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.Name
	}
	return out
}

// claimWrapper builds a ResourceClaim allocated on the test node.
type claimWrapper struct{ resourceapi.ResourceClaim }

// makeClaim starts claim name (UID "uid-<name>") in namespace "default", allocated with no
// device yet and reserved for pod "pod-<name>".
func makeClaim(name string) *claimWrapper {
	return &claimWrapper{resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Status: resourceapi.ResourceClaimStatus{
			Allocation:  &resourceapi.AllocationResult{},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod-" + name, UID: types.UID("pod-uid-" + name)}},
		},
	}}
}

// device adds an allocation result of the test driver on the test node's pool: device dev,
// with mem bytes and cores consumed (mem < 0: no consumed memory).
func (c *claimWrapper) device(dev string, mem, cores int64) *claimWrapper {
	consumed := map[resourceapi.QualifiedName]resource.Quantity{CapacityCores: *resource.NewQuantity(cores, resource.DecimalSI)}
	if mem >= 0 {
		consumed[CapacityMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	n := len(c.Status.Allocation.Devices.Results)
	c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
		Request: "gpu", Driver: driverName, Pool: testNode, Device: dev, ConsumedCapacity: consumed,
		ShareID: ptr.To(types.UID(fmt.Sprintf("share-%s-%d", c.Name, n))),
	})
	return c
}

// with changes the last allocation result.
func (c *claimWrapper) with(f func(r *resourceapi.DeviceRequestAllocationResult)) *claimWrapper {
	f(&c.Status.Allocation.Devices.Results[len(c.Status.Allocation.Devices.Results)-1])
	return c
}

func (c *claimWrapper) obj() *resourceapi.ResourceClaim { return c.DeepCopy() }

// readSpecFile reads the CDI spec of a claim, or fails the test.
func readSpecFile(t *testing.T, cfg *Config, uid types.UID) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cfg.CDIRoot, cfg.DriverName+"_claim_"+string(uid)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// envOf reads CDI "NAME=value" entries into a map.
func envOf(entries []string) map[string]string {
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		k, v, _ := strings.Cut(e, "=")
		out[k] = v
	}
	return out
}
