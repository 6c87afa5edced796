package deviceplugin

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// fakeSysfs writes numa_node files under a temporary sysfs root: bus ID (as sysfs names it)
// → content.
func fakeSysfs(t *testing.T, numa map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for bus, v := range numa {
		dir := filepath.Join(root, "bus", "pci", "devices", bus)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// noNVMLNUMA makes every card of h answer Not Supported to NVML's NUMA call, as the H100 the
// issue was measured on did.
func noNVMLNUMA(h *mockhost.Host) {
	for _, d := range h.Devices {
		d.(*server.Device).GetNumaNodeIdFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	}
}

// topologyPlugin is a plugin over a mock host changed by change, with sysfs at sysfsRoot.
func topologyPlugin(t *testing.T, o mockhost.Options, sysfsRoot string, change func(h *mockhost.Host)) *Plugin {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	h, err := mockhost.New("dgxa100", o)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(h)
	}
	client := k8sfake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}})
	p, err := New(nvml.New(h), client, WithNodeName(testNode), WithPodSource(fake.ClientPods{Client: client, Node: testNode}),
		WithHealthCheck(false), WithLogger(logger), WithSysfsRoot(sysfsRoot))
	if err != nil {
		t.Fatalf("New() = %v; topology problems must never fail the plugin", err)
	}
	return p
}

// cardTopology is what the node annotation says of one card's topology.
type cardTopology struct {
	NUMA    string // "-" when unknown
	Links   string
	Version int
}

func topologyOf(gpus []contract.GPU) []cardTopology {
	out := make([]cardTopology, len(gpus))
	for i, g := range gpus {
		out[i] = cardTopology{NUMA: "-", Links: g.Links, Version: g.TopologyVersion}
		if g.NUMA != nil {
			out[i].NUMA = strconv.Itoa(*g.NUMA)
		}
	}
	return out
}

// rows gives each card numa and one row of the matrix, at the current grammar version.
func rows(numa []string, links ...string) []cardTopology {
	out := make([]cardTopology, len(numa))
	for i := range numa {
		out[i] = cardTopology{NUMA: numa[i]}
		if links != nil {
			out[i].Links, out[i].Version = links[i], contract.TopologyVersion
		}
	}
	return out
}

// inventoryTopologyCase is one host of TestInventoryTopology and what its cards publish.
type inventoryTopologyCase struct {
	name   string
	opts   mockhost.Options
	sysfs  map[string]string
	change func(h *mockhost.Host)
	want   []cardTopology
}

// inventoryTopologyCases are an NVSwitch box, a 2-socket PCIe box 4+4, NVLink pairs, and
// NVML and sysfs failures.
func inventoryTopologyCases() []inventoryTopologyCase {
	// sysfs as the PCIe box's kernel sees it: cards 0-3 on node 0, 4-7 on node 1
	pcieSysfs := map[string]string{}
	for i := range 8 {
		pcieSysfs[nvml.NormalizeBusID(mockhost.BusID(i))] = strconv.Itoa(i / 4)
	}
	halves := []string{"0", "0", "0", "0", "1", "1", "1", "1"}
	return []inventoryTopologyCase{
		{name: "NVSwitch box: 8 cards, NV12 between any two, NUMA from NVML", opts: mockhost.Options{},
			want: rows(halves,
				"X NV12 NV12 NV12 NV12 NV12 NV12 NV12", "NV12 X NV12 NV12 NV12 NV12 NV12 NV12",
				"NV12 NV12 X NV12 NV12 NV12 NV12 NV12", "NV12 NV12 NV12 X NV12 NV12 NV12 NV12",
				"NV12 NV12 NV12 NV12 X NV12 NV12 NV12", "NV12 NV12 NV12 NV12 NV12 X NV12 NV12",
				"NV12 NV12 NV12 NV12 NV12 NV12 X NV12", "NV12 NV12 NV12 NV12 NV12 NV12 NV12 X")},
		{name: "2-socket PCIe box 4+4, NUMA from sysfs (NVML does not know)", opts: mockhost.Options{Links: mockhost.LinksPCIe},
			sysfs: pcieSysfs, change: noNVMLNUMA,
			want: rows(halves,
				"X PIX NODE NODE SYS SYS SYS SYS", "PIX X NODE NODE SYS SYS SYS SYS",
				"NODE NODE X PIX SYS SYS SYS SYS", "NODE NODE PIX X SYS SYS SYS SYS",
				"SYS SYS SYS SYS X PIX NODE NODE", "SYS SYS SYS SYS PIX X NODE NODE",
				"SYS SYS SYS SYS NODE NODE X PIX", "SYS SYS SYS SYS NODE NODE PIX X")},
		{name: "NVLink pairs", opts: mockhost.Options{GPUs: 4, Links: mockhost.LinksPairs},
			want: rows([]string{"0", "0", "1", "1"}, "X NV4 SYS SYS", "NV4 X SYS SYS", "SYS SYS X NV4", "SYS SYS NV4 X")},
		{name: "sysfs says -1 or nothing: NUMA unknown", opts: mockhost.Options{GPUs: 2, Links: mockhost.LinksPCIe},
			sysfs: map[string]string{"0000:07:00.0": "-1"}, change: noNVMLNUMA,
			want: rows([]string{"-", "-"}, "X PIX", "PIX X")},
		{name: "sysfs garbage: NUMA unknown", opts: mockhost.Options{GPUs: 2, Links: mockhost.LinksPCIe},
			sysfs: map[string]string{"0000:07:00.0": "node0", "0000:0f:00.0": "4096"}, change: noNVMLNUMA,
			want: rows([]string{"-", "-"}, "X PIX", "PIX X")},
		{name: "one card's NVLinks fail: no card has links, NUMA stays", opts: mockhost.Options{GPUs: 4},
			change: func(h *mockhost.Host) {
				h.Devices[3].(*server.Device).GetNvLinkStateFunc = func(int) (gonvml.EnableState, gonvml.Return) {
					return 0, gonvml.ERROR_UNKNOWN
				}
			},
			want: rows([]string{"0", "0", "1", "1"})},
		{name: "common ancestor not supported: no links", opts: mockhost.Options{GPUs: 2, Links: mockhost.LinksPCIe},
			change: func(h *mockhost.Host) {
				for _, d := range h.Devices {
					d.(*server.Device).GetTopologyCommonAncestorFunc = func(gonvml.Device) (gonvml.GpuTopologyLevel, gonvml.Return) {
						return 0, gonvml.ERROR_NOT_SUPPORTED
					}
				}
			},
			want: rows([]string{"0", "1"})},
		{name: "no PCI info: NVSwitch links still read, NUMA from NVML", opts: mockhost.Options{GPUs: 2},
			change: func(h *mockhost.Host) {
				for _, d := range h.Devices {
					d.(*server.Device).GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) { return gonvml.PciInfo{}, gonvml.ERROR_UNKNOWN }
				}
			},
			want: rows([]string{"0", "1"}, "X NV12", "NV12 X")},
	}
}

func TestInventoryTopology(t *testing.T) {
	tests := inventoryTopologyCases()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := topologyPlugin(t, tt.opts, fakeSysfs(t, tt.sysfs), tt.change)
			gpus := p.inv.contractGPUs(contract.MemoryLimitNone)
			if diff := cmp.Diff(tt.want, topologyOf(gpus)); diff != "" {
				t.Errorf("card topology (-want,+got):\n%s", diff)
			}
			// what the plugin publishes, the contract reads back
			raw, err := contract.EncodeGPUs(gpus)
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := contract.DecodeGPUs(raw)
			if err != nil {
				t.Fatalf("DecodeGPUs(%s) = %v", raw, err)
			}
			top, err := contract.TopologyOf(decoded)
			if err != nil {
				t.Fatalf("TopologyOf() = %v", err)
			}
			if (top != nil) != (tt.want[0].Links != "") {
				t.Errorf("TopologyOf() = %v, want a matrix %t", top, tt.want[0].Links != "")
			}
		})
	}
}

func TestDevicesCarryNUMANodes(t *testing.T) {
	tests := []struct {
		name   string
		sysfs  map[string]string
		change func(h *mockhost.Host)
		want   map[string]int // "<card>" → devices with that NUMA node ("-" key: none)
	}{
		{name: "NVML knows", want: map[string]int{"0@0": 4, "1@1": 4}},
		{name: "sysfs knows", sysfs: map[string]string{"0000:07:00.0": "1", "0000:0f:00.0": "0"}, change: noNVMLNUMA,
			want: map[string]int{"0@1": 4, "1@0": 4}},
		{name: "nobody knows", change: noNVMLNUMA, want: map[string]int{"0@-": 4, "1@-": 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := topologyPlugin(t, mockhost.Options{GPUs: 2, MemoryBytes: 4 << 30}, fakeSysfs(t, tt.sysfs), tt.change)
			devs, _ := p.inv.devices()
			got := map[string]int{}
			for _, d := range devs {
				g, err := p.inv.gpuOf(d.ID)
				if err != nil {
					t.Fatal(err)
				}
				numa := "-"
				if d.Topology != nil {
					if len(d.Topology.Nodes) != 1 {
						t.Fatalf("device %s: %d NUMA nodes, want 1", d.ID, len(d.Topology.Nodes))
					}
					numa = strconv.Itoa(int(d.Topology.Nodes[0].ID))
				}
				got[strconv.Itoa(g)+"@"+numa]++
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("devices by card@NUMA node (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSysfsNUMANode(t *testing.T) {
	root := fakeSysfs(t, map[string]string{"0000:07:00.0": "1", "0000:0f:00.0": "-1"})
	tests := []struct {
		name, busID string
		want        int
		wantErr     bool
	}{
		{name: "known", busID: "0000:07:00.0", want: 1},
		{name: "kernel does not know", busID: "0000:0f:00.0", want: nvml.NoNUMANode},
		{name: "no such device", busID: "0000:47:00.0", want: nvml.NoNUMANode, wantErr: true},
		{name: "no bus ID", busID: "", want: nvml.NoNUMANode, wantErr: true},
		{name: "a path, not a bus ID", busID: "../../../etc", want: nvml.NoNUMANode, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sysfsNUMANode(root, tt.busID)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("sysfsNUMANode(%q) = %d, %v; want %d, error %t", tt.busID, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
