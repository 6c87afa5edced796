package mockhost

import (
	"errors"
	"fmt"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// ErrUnknownLinks is returned by New for an Options.Links it does not know.
var ErrUnknownLinks = errors.New("unknown fake GPU link layout")

// Link layouts of Options.Links. Every layout puts the first half of the cards on NUMA node 0
// and socket 0, the rest on node 1, and pairs of cards (2k, 2k+1) behind one PCIe switch: PIX
// within a pair, NODE within a socket, SYS across sockets.
const (
	// LinksNVSwitch: every card reaches the NVSwitches by all its NVLink links (12 on the
	// A100, 18 on the H100, H200 and B200), so any two are NV12 or NV18. The default.
	LinksNVSwitch = "nvswitch"
	// LinksPCIe: no NVLink (Not Supported on every link), PCIe only.
	LinksPCIe = "pcie"
	// LinksPairs: cards 2k and 2k+1 joined by PairNVLinks direct links, PCIe otherwise.
	LinksPairs = "pairs"
)

// PairNVLinks is the direct NVLink count of a LinksPairs pair.
const PairNVLinks = 4

// LinkLayouts lists the layouts Options.Links accepts.
func LinkLayouts() []string { return []string{LinksNVSwitch, LinksPCIe, LinksPairs} }

// layout is how one host's cards are joined.
type layout struct {
	kind string
	// switchLinks is each card's NVLink count to the NVSwitches (LinksNVSwitch).
	switchLinks int
}

// layoutOf checks a layout name ("" is LinksNVSwitch) for the named host.
func layoutOf(host, links string) (layout, error) {
	switch links {
	case "", LinksNVSwitch:
		n := 18
		if host == "dgxa100" {
			n = 12
		}
		return layout{kind: LinksNVSwitch, switchLinks: n}, nil
	case LinksPCIe, LinksPairs:
		return layout{kind: links}, nil
	}
	return layout{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownLinks, links, strings.Join(LinkLayouts(), ", "))
}

// BusID is the PCI address the mock gives card i, as NVML writes it ("00000000:07:00.0"):
// the bus numbers of a DGX A100's cards, then 0xc8+i.
func BusID(i int) string {
	cardBus := [...]int{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}
	bus := 0xc8 + i
	if i < len(cardBus) {
		bus = cardBus[i]
	}
	return fmt.Sprintf("%08X:%02X:00.0", 0, bus)
}

// switchBusID is the PCI address of NVSwitch k (six of them, as on a DGX A100).
func switchBusID(k int) string { return fmt.Sprintf("%08X:%02X:00.0", 0, 0xc1+k%6) }

// pciInfo is NVML's PCI info for an address.
func pciInfo(busID string, deviceID uint32) gonvml.PciInfo {
	p := gonvml.PciInfo{PciDeviceId: deviceID}
	for k := 0; k < len(busID) && k < len(p.BusId)-1; k++ {
		p.BusId[k] = int8(busID[k]) //nolint:gosec // G115: PCI addresses are ASCII, as C chars hold them
	}
	return p
}

// wire sets card i's (of n) PCI address, NVLink and PCIe answers.
func (l layout) wire(dev *server.Device, i, n int) {
	dev.PciBusID = BusID(i)
	dev.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
		return pciInfo(BusID(i), dev.Config.PciDeviceId), gonvml.SUCCESS
	}
	dev.GetTopologyCommonAncestorFunc = func(other gonvml.Device) (gonvml.GpuTopologyLevel, gonvml.Return) {
		j, ret := other.GetIndex()
		if ret != gonvml.SUCCESS {
			return 0, ret
		}
		return pcieLevel(i, j, n), gonvml.SUCCESS
	}
	peer := l.peer(i, n)
	dev.GetNvLinkStateFunc = func(link int) (gonvml.EnableState, gonvml.Return) {
		if !peer.has(link) {
			return gonvml.FEATURE_DISABLED, gonvml.ERROR_NOT_SUPPORTED
		}
		return gonvml.FEATURE_ENABLED, gonvml.SUCCESS
	}
	dev.GetNvLinkRemotePciInfoFunc = func(link int) (gonvml.PciInfo, gonvml.Return) {
		if !peer.has(link) {
			return gonvml.PciInfo{}, gonvml.ERROR_NOT_SUPPORTED
		}
		return pciInfo(peer.busID(link), 0), gonvml.SUCCESS
	}
	dev.GetNvLinkRemoteDeviceTypeFunc = func(link int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
		if !peer.has(link) {
			return gonvml.NVLINK_DEVICE_TYPE_UNKNOWN, gonvml.ERROR_NOT_SUPPORTED
		}
		return peer.kind, gonvml.SUCCESS
	}
}

// nvlinkPeer is what a card's NVLink links reach.
type nvlinkPeer struct {
	links int
	kind  gonvml.IntNvLinkDeviceType
	// card is the peer card's index (NVLINK_DEVICE_TYPE_GPU).
	card int
}

func (p nvlinkPeer) has(link int) bool { return link >= 0 && link < p.links }

func (p nvlinkPeer) busID(link int) string {
	if p.kind == gonvml.NVLINK_DEVICE_TYPE_SWITCH {
		return switchBusID(link)
	}
	return BusID(p.card)
}

// peer is what card i's links reach in the layout.
func (l layout) peer(i, n int) nvlinkPeer {
	switch {
	case l.kind == LinksNVSwitch:
		return nvlinkPeer{links: l.switchLinks, kind: gonvml.NVLINK_DEVICE_TYPE_SWITCH}
	case l.kind == LinksPairs && i^1 < n:
		return nvlinkPeer{links: PairNVLinks, kind: gonvml.NVLINK_DEVICE_TYPE_GPU, card: i ^ 1}
	}
	return nvlinkPeer{}
}

// pcieLevel is the common ancestor of cards i and j of n: one switch per pair, one NUMA node
// per half.
func pcieLevel(i, j, n int) gonvml.GpuTopologyLevel {
	switch {
	case i/2 == j/2:
		return gonvml.TOPOLOGY_SINGLE
	case i*2/n == j*2/n:
		return gonvml.TOPOLOGY_NODE
	}
	return gonvml.TOPOLOGY_SYSTEM
}
