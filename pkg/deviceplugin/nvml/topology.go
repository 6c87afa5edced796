package nvml

import (
	"fmt"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Remote is what the far end of an NVLink link is.
type Remote int

// The far ends of NVLink links.
const (
	// RemoteUnknown: the driver does not say (older than nvmlDeviceGetNvLinkRemoteDeviceType).
	// ReadTopology takes it for a GPU when its bus ID is one of the node's cards, else for an
	// NVSwitch.
	RemoteUnknown Remote = iota
	// RemoteGPU: another GPU.
	RemoteGPU
	// RemoteSwitch: an NVSwitch, which joins every GPU that reaches one.
	RemoteSwitch
	// RemoteCPU: a CPU (IBM's NPU); it joins no GPUs.
	RemoteCPU
)

// NVLink is one active NVLink link of a GPU.
type NVLink struct {
	// Remote is what the link reaches.
	Remote Remote
	// BusID is the PCI address of the far end, as Device.BusID writes it.
	BusID string
}

// Library symbols the topology calls need: go-nvml calls a function the loaded library lacks
// through a null pointer, so each is looked up first.
const (
	symNVLinkState      = "nvmlDeviceGetNvLinkState"
	symNVLinkRemotePCI  = "nvmlDeviceGetNvLinkRemotePciInfo"
	symNVLinkRemotePCI2 = "nvmlDeviceGetNvLinkRemotePciInfo_v2"
	symNVLinkRemoteType = "nvmlDeviceGetNvLinkRemoteDeviceType"
	symCommonAncestor   = "nvmlDeviceGetTopologyCommonAncestor"
	symNumaNodeID       = "nvmlDeviceGetNumaNodeId"
)

// hasSymbol reports whether the loaded library has the function name.
func (l *lib) hasSymbol(name string) bool {
	ext := l.nv.Extensions()
	return ext != nil && ext.LookupSymbol(name) == nil
}

// needSymbols is nil when the library has every function of names, else ErrNotSupported
// naming the first one missing; alternatives are "a|b".
func (l *lib) needSymbols(names ...string) error {
	for _, n := range names {
		found := false
		for _, alt := range strings.Split(n, "|") {
			found = found || l.hasSymbol(alt)
		}
		if !found {
			return fmt.Errorf("%w: the NVML library has no %s (driver too old)", ErrNotSupported, n)
		}
	}
	return nil
}

// handle is the go-nvml device of NVML index i.
func (l *lib) handle(i int) (gonvml.Device, error) {
	d, ret := l.nv.DeviceGetHandleByIndex(i)
	return d, asError(fmt.Sprintf("device %d handle", i), ret)
}

// NVLinks walks every link NVML may have (NVLINK_MAX_LINKS): a link the card does not have
// answers Not Supported or Invalid Argument and is skipped; any other failure is an error.
func (l *lib) NVLinks(i int) ([]NVLink, error) {
	if err := l.needSymbols(symNVLinkState, symNVLinkRemotePCI2+"|"+symNVLinkRemotePCI); err != nil {
		return nil, fmt.Errorf("device %d NVLinks: %w", i, err)
	}
	d, err := l.handle(i)
	if err != nil {
		return nil, err
	}
	withType := l.hasSymbol(symNVLinkRemoteType)
	var out []NVLink
	for link := range gonvml.NVLINK_MAX_LINKS {
		state, ret := d.GetNvLinkState(link)
		switch ret {
		case gonvml.SUCCESS:
		case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_INVALID_ARGUMENT:
			continue
		default:
			return nil, asError(fmt.Sprintf("device %d NVLink %d state", i, link), ret)
		}
		if state != gonvml.FEATURE_ENABLED {
			continue
		}
		pci, ret := d.GetNvLinkRemotePciInfo(link)
		if err := asError(fmt.Sprintf("device %d NVLink %d remote PCI info", i, link), ret); err != nil {
			return nil, err
		}
		nl := NVLink{BusID: busIDOf(pci)}
		if withType {
			nl.Remote = remoteOf(d.GetNvLinkRemoteDeviceType(link))
		}
		out = append(out, nl)
	}
	return out, nil
}

// remoteOf maps NVML's remote device type; a failed call is RemoteUnknown.
func remoteOf(t gonvml.IntNvLinkDeviceType, ret gonvml.Return) Remote {
	if ret != gonvml.SUCCESS {
		return RemoteUnknown
	}
	switch t {
	case gonvml.NVLINK_DEVICE_TYPE_GPU:
		return RemoteGPU
	case gonvml.NVLINK_DEVICE_TYPE_SWITCH:
		return RemoteSwitch
	case gonvml.NVLINK_DEVICE_TYPE_IBMNPU:
		return RemoteCPU
	}
	return RemoteUnknown
}

// CommonAncestor asks NVML for the closest common ancestor of GPUs i and j.
func (l *lib) CommonAncestor(i, j int) (contract.Link, error) {
	if err := l.needSymbols(symCommonAncestor); err != nil {
		return contract.LinkSYS, fmt.Errorf("devices %d and %d: %w", i, j, err)
	}
	di, err := l.handle(i)
	if err != nil {
		return contract.LinkSYS, err
	}
	dj, err := l.handle(j)
	if err != nil {
		return contract.LinkSYS, err
	}
	level, ret := di.GetTopologyCommonAncestor(dj)
	if err := asError(fmt.Sprintf("devices %d and %d common ancestor", i, j), ret); err != nil {
		return contract.LinkSYS, err
	}
	return linkOfLevel(level), nil
}

// linkOfLevel maps NVML's topology levels onto nvidia-smi topo's tokens; a level this code
// does not know is SYS, the weakest.
func linkOfLevel(level gonvml.GpuTopologyLevel) contract.Link {
	switch level {
	case gonvml.TOPOLOGY_INTERNAL, gonvml.TOPOLOGY_SINGLE:
		return contract.LinkPIX
	case gonvml.TOPOLOGY_MULTIPLE:
		return contract.LinkPXB
	case gonvml.TOPOLOGY_HOSTBRIDGE:
		return contract.LinkPHB
	case gonvml.TOPOLOGY_NODE:
		return contract.LinkNODE
	}
	return contract.LinkSYS
}

// busIDOf is the PCI address of pci as sysfs names it (NormalizeBusID), from NVML's bus ID
// string, else from its numeric fields.
func busIDOf(pci gonvml.PciInfo) string {
	if s := cString(pci.BusId[:]); s != "" {
		return NormalizeBusID(s)
	}
	if s := cString(pci.BusIdLegacy[:]); s != "" {
		return NormalizeBusID(s)
	}
	if pci.Domain == 0 && pci.Bus == 0 && pci.Device == 0 {
		return ""
	}
	return fmt.Sprintf("%04x:%02x:%02x.0", pci.Domain, pci.Bus, pci.Device)
}

// cString reads a NUL-terminated C string.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c)) //nolint:gosec // G115: a C char read back as the byte it is
	}
	return strings.TrimSpace(sb.String())
}

// NormalizeBusID writes a PCI address as sysfs names its folder under /sys/bus/pci/devices:
// lower-case, the domain in 4 digits when it fits ("00000000:07:00.0" → "0000:07:00.0"), a
// missing domain as 0000.
func NormalizeBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 2:
		return "0000:" + s
	case 3:
		dom := strings.TrimLeft(parts[0], "0")
		if len(dom) < 4 {
			dom = strings.Repeat("0", 4-len(dom)) + dom
		}
		return dom + ":" + parts[1] + ":" + parts[2]
	}
	return s
}
