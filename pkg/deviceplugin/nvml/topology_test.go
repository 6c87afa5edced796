package nvml_test

import (
	"errors"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// matrixOf renders a link matrix as nvidia-smi topo -m rows.
func matrixOf(links [][]contract.Link) []string {
	rows := make([]string, len(links))
	for i := range links {
		rows[i] = contract.EncodeLinks(links, i)
	}
	return rows
}

// readHost reads the topology of a mock host after change.
func readHost(t *testing.T, host string, o mockhost.Options, change func(h *mockhost.Host)) ([]string, error) {
	t.Helper()
	h, err := mockhost.New(host, o)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(h)
	}
	lib := nvml.New(h)
	var devs []nvml.Device
	for i := range h.Devices {
		d, err := lib.Device(i)
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	links, err := nvml.ReadTopology(lib, devs)
	if err != nil {
		return nil, err
	}
	return matrixOf(links), nil
}

// dev is mock card i of h.
func dev(h *mockhost.Host, i int) *server.Device { return h.Devices[i].(*server.Device) }

func TestReadTopology(t *testing.T) {
	pcie8 := []string{
		"X PIX NODE NODE SYS SYS SYS SYS",
		"PIX X NODE NODE SYS SYS SYS SYS",
		"NODE NODE X PIX SYS SYS SYS SYS",
		"NODE NODE PIX X SYS SYS SYS SYS",
		"SYS SYS SYS SYS X PIX NODE NODE",
		"SYS SYS SYS SYS PIX X NODE NODE",
		"SYS SYS SYS SYS NODE NODE X PIX",
		"SYS SYS SYS SYS NODE NODE PIX X",
	}
	tests := []struct {
		name   string
		host   string
		opts   mockhost.Options
		change func(h *mockhost.Host)
		want   []string
	}{
		{name: "DGX A100: NVSwitch, NV12 everywhere", host: "dgxa100", opts: mockhost.Options{GPUs: 3},
			want: []string{"X NV12 NV12", "NV12 X NV12", "NV12 NV12 X"}},
		{name: "DGX H100: NVSwitch, NV18 everywhere", host: "dgxh100",
			want: func() []string {
				var rows []string
				for i := range 8 {
					toks := strings.Fields(strings.Repeat("NV18 ", 8))
					toks[i] = "X"
					rows = append(rows, strings.Join(toks, " "))
				}
				return rows
			}()},
		{name: "2-socket PCIe box, 4+4", host: "dgxa100", opts: mockhost.Options{Links: mockhost.LinksPCIe}, want: pcie8},
		{name: "NVLink pairs over PCIe", host: "dgxa100", opts: mockhost.Options{GPUs: 4, Links: mockhost.LinksPairs},
			want: []string{"X NV4 SYS SYS", "NV4 X SYS SYS", "SYS SYS X NV4", "SYS SYS NV4 X"}},
		{name: "older driver without the remote device type: NVSwitch by its bus ID", host: "dgxa100", opts: mockhost.Options{GPUs: 2},
			change: func(h *mockhost.Host) {
				h.LookupSymbolFunc = func(s string) error {
					if s == "nvmlDeviceGetNvLinkRemoteDeviceType" {
						return errors.New("undefined symbol")
					}
					return nil
				}
			},
			want: []string{"X NV12", "NV12 X"}},
		{name: "older driver without the remote device type: pairs by their bus IDs", host: "dgxa100", opts: mockhost.Options{GPUs: 2, Links: mockhost.LinksPairs},
			change: func(h *mockhost.Host) {
				for i := range h.Devices {
					dev(h, i).GetNvLinkRemoteDeviceTypeFunc = func(int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
						return 0, gonvml.ERROR_FUNCTION_NOT_FOUND
					}
				}
			},
			want: []string{"X NV4", "NV4 X"}},
		{name: "a link to a CPU joins no cards", host: "dgxa100", opts: mockhost.Options{GPUs: 2, Links: mockhost.LinksPairs},
			change: func(h *mockhost.Host) {
				for i := range h.Devices {
					dev(h, i).GetNvLinkRemoteDeviceTypeFunc = func(int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
						return gonvml.NVLINK_DEVICE_TYPE_IBMNPU, gonvml.SUCCESS
					}
				}
			},
			want: []string{"X PIX", "PIX X"}},
		{name: "inactive links do not count", host: "dgxa100", opts: mockhost.Options{GPUs: 2, Links: mockhost.LinksPairs},
			change: func(h *mockhost.Host) {
				for i := range h.Devices {
					dev(h, i).GetNvLinkStateFunc = func(link int) (gonvml.EnableState, gonvml.Return) {
						if link < 4 {
							return gonvml.EnableState(link % 2), gonvml.SUCCESS // half of them down
						}
						return 0, gonvml.ERROR_INVALID_ARGUMENT
					}
				}
			},
			want: []string{"X NV2", "NV2 X"}},
		{name: "one card", host: "dgxa100", opts: mockhost.Options{GPUs: 1}, want: []string{"X"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readHost(t, tt.host, tt.opts, tt.change)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("links (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReadTopologyErrors(t *testing.T) {
	tests := []struct {
		name   string
		opts   mockhost.Options
		change func(h *mockhost.Host)
		// wantNotSupported: the error wraps nvml.ErrNotSupported.
		wantNotSupported bool
	}{
		{name: "NVLink state fails on one card", opts: mockhost.Options{GPUs: 4},
			change: func(h *mockhost.Host) {
				dev(h, 2).GetNvLinkStateFunc = func(int) (gonvml.EnableState, gonvml.Return) { return 0, gonvml.ERROR_GPU_IS_LOST }
			}},
		{name: "remote PCI info fails on an active link", opts: mockhost.Options{GPUs: 2},
			change: func(h *mockhost.Host) {
				dev(h, 1).GetNvLinkRemotePciInfoFunc = func(int) (gonvml.PciInfo, gonvml.Return) { return gonvml.PciInfo{}, gonvml.ERROR_UNKNOWN }
			}},
		{name: "common ancestor not supported", opts: mockhost.Options{GPUs: 2, Links: mockhost.LinksPCIe}, wantNotSupported: true,
			change: func(h *mockhost.Host) {
				dev(h, 1).GetTopologyCommonAncestorFunc = func(gonvml.Device) (gonvml.GpuTopologyLevel, gonvml.Return) {
					return 0, gonvml.ERROR_NOT_SUPPORTED
				}
			}},
		{name: "library without the NVLink functions", opts: mockhost.Options{GPUs: 2}, wantNotSupported: true,
			change: func(h *mockhost.Host) {
				h.LookupSymbolFunc = func(s string) error {
					if strings.HasPrefix(s, "nvmlDeviceGetNvLinkRemotePciInfo") {
						return errors.New("undefined symbol")
					}
					return nil
				}
			}},
		{name: "library without the common ancestor", opts: mockhost.Options{GPUs: 2, Links: mockhost.LinksPCIe}, wantNotSupported: true,
			change: func(h *mockhost.Host) {
				h.LookupSymbolFunc = func(s string) error {
					if s == "nvmlDeviceGetTopologyCommonAncestor" {
						return errors.New("undefined symbol")
					}
					return nil
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readHost(t, "dgxa100", tt.opts, tt.change)
			if err == nil {
				t.Fatalf("ReadTopology() = %v, want an error", got)
			}
			if errors.Is(err, nvml.ErrNotSupported) != tt.wantNotSupported {
				t.Errorf("ReadTopology() = %v; wraps ErrNotSupported: %t, want %t", err, errors.Is(err, nvml.ErrNotSupported), tt.wantNotSupported)
			}
		})
	}
}

func TestNormalizeBusID(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "NVML's 8-digit domain", in: "00000000:1A:00.0", want: "0000:1a:00.0"},
		{name: "legacy 4-digit domain", in: "0000:07:00.0", want: "0000:07:00.0"},
		{name: "large domain kept", in: "00010001:07:00.0", want: "10001:07:00.0"},
		{name: "no domain", in: "3b:00.0", want: "0000:3b:00.0"},
		{name: "not an address", in: "weird", want: "weird"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nvml.NormalizeBusID(tt.in); got != tt.want {
				t.Errorf("NormalizeBusID(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNUMAWithoutTheFunction(t *testing.T) {
	h, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	h.LookupSymbolFunc = func(s string) error {
		if s == "nvmlDeviceGetNumaNodeId" {
			return errors.New("undefined symbol")
		}
		return nil
	}
	dev(h, 1).GetNumaNodeIdFunc = func() (int, gonvml.Return) { panic("called a function the library lacks") }
	d, err := nvml.New(h).Device(1)
	if err != nil {
		t.Fatal(err)
	}
	if d.NUMANode != nvml.NoNUMANode {
		t.Errorf("NUMANode = %d, want NoNUMANode", d.NUMANode)
	}
}
