package deviceplugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// h100Bytes is the total NVML reported for the H100 80GB HBM3 measured in issue 40 (79.6 GiB).
const h100Bytes = 85_520_809_984

// cardSize is what the plugin publishes of a card's memory, and how many devices it offers
// kubelet for it.
type cardSize struct {
	Units                   int64
	Total, Reserved, Usable int64
	Devices                 int
}

// TestUnitsFromUsableMemory: a card's units are its total less the driver's reserve
// (nvmlDeviceGetMemoryInfo_v2) and the operator's (WithReserveMemory), rounded down; the node
// annotation carries the three figures, and kubelet is offered that many devices.
func TestUnitsFromUsableMemory(t *testing.T) {
	tests := []struct {
		name    string
		host    mockhost.Options
		reserve int64
		want    cardSize
		// wantWarning: the plugin warns that the driver's reserve is unknown.
		wantWarning bool
	}{
		{name: "T4-like: 15 GiB, 450 MiB reserved by the driver",
			host: mockhost.Options{MemoryBytes: 15 << 30, ReservedBytes: 450 << 20},
			want: cardSize{Units: 14, Total: 15 << 30, Reserved: 450 << 20, Usable: 15<<30 - 450<<20}},
		{name: "T4-like on a driver that cannot say what it reserves: the total, and a warning",
			host: mockhost.Options{MemoryBytes: 15 << 30, ReservedBytes: 450 << 20, NoMemoryInfoV2: true},
			want: cardSize{Units: 15, Total: 15 << 30, Usable: 15 << 30}, wantWarning: true},
		{name: "T4-like with 512Mi held back by the operator as well",
			host: mockhost.Options{MemoryBytes: 15 << 30, ReservedBytes: 450 << 20}, reserve: 512 << 20,
			want: cardSize{Units: 14, Total: 15 << 30, Reserved: 962 << 20, Usable: 15<<30 - 962<<20}},
		{name: "H100 as measured: 79 units still fit after 0.5 GiB",
			host: mockhost.Options{MemoryBytes: h100Bytes, ReservedBytes: 512 << 20},
			want: cardSize{Units: 79, Total: h100Bytes, Reserved: 512 << 20, Usable: h100Bytes - 512<<20}},
		{name: "H100 with 1Gi held back by the operator: 78",
			host: mockhost.Options{MemoryBytes: h100Bytes, ReservedBytes: 512 << 20}, reserve: 1 << 30,
			want: cardSize{Units: 78, Total: h100Bytes, Reserved: 1536 << 20, Usable: h100Bytes - 1536<<20}},
		{name: "no reserve: the whole card, as before",
			host: mockhost.Options{MemoryBytes: 16 << 30},
			want: cardSize{Units: 16, Total: 16 << 30, Usable: 16 << 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			tt.host.GPUs = 1
			host, err := mockhost.New("dgxa100", tt.host)
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(nvml.New(host), k8sfake.NewClientset(), WithNodeName(testNode), WithPodSource(fake.ClientPods{}),
				WithReserveMemory(tt.reserve), WithLogger(logger))
			if err != nil {
				t.Fatal(err)
			}
			g := p.GPUs()[0]
			devs, _ := p.inv.devices()
			got := cardSize{Units: g.Units, Total: g.MemoryBytes, Reserved: g.ReservedBytes, Usable: g.UsableBytes, Devices: len(devs)}
			tt.want.Devices = int(tt.want.Units)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("card (-want,+got):\n%s", diff)
			}
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			if warned := strings.Contains(logs, "cannot say what the driver reserves"); warned != tt.wantWarning {
				t.Errorf("warned that the driver's reserve is unknown: %t, want %t\n%s", warned, tt.wantWarning, logs)
			}
		})
	}
}

// TestReserveLeavingNothingIsRefused: a reserve that leaves nothing of a card, or a negative
// one, is a configuration error.
func TestReserveLeavingNothingIsRefused(t *testing.T) {
	tests := []struct {
		name    string
		reserve int64
	}{
		{name: "exactly what the driver leaves", reserve: 15<<30 - 450<<20},
		{name: "more than the card", reserve: 16 << 30},
		{name: "negative", reserve: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 1, MemoryBytes: 15 << 30, ReservedBytes: 450 << 20})
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(nvml.New(host), k8sfake.NewClientset(), WithNodeName(testNode), WithPodSource(fake.ClientPods{}), WithReserveMemory(tt.reserve))
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("WithReserveMemory(%d) on a 15 GiB card: %v, want ErrInvalidConfig", tt.reserve, err)
			}
		})
	}
}
