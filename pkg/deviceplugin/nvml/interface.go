// Package nvml is the device plugin's narrow view of NVIDIA's management library: the few
// calls the plugin needs, returning Go errors. Only this package calls go-nvml.
package nvml

import (
	"errors"
	"time"

	"github.com/gpushare/gpushare/pkg/contract"
)

// ErrTimeout is returned by EventWaiter.Wait when no event arrived in time.
var ErrTimeout = errors.New("nvml: no event before the timeout")

// ErrLibraryNotFound is returned by Init when libnvidia-ml.so.1 cannot be loaded.
var ErrLibraryNotFound = errors.New("nvml: libnvidia-ml.so.1 not found (is the NVIDIA driver installed and the library mounted into the container?)")

// ErrNotSupported is wrapped by errors of calls the card or the driver does not support
// (NVML's ERROR_NOT_SUPPORTED, or a function missing from an older library).
var ErrNotSupported = errors.New("nvml: not supported")

// NoNUMANode is Device.NUMANode when NVML does not know the card's NUMA node.
const NoNUMANode = -1

// Device is what the plugin knows about one GPU.
type Device struct {
	// Index is the NVML index.
	Index int
	// UUID is the NVML UUID, e.g. "GPU-8d5a...".
	UUID string
	// Model is the product name, e.g. "NVIDIA A100-SXM4-40GB".
	Model string
	// MemoryBytes is the total memory.
	MemoryBytes uint64
	// ReservedBytes is the part of MemoryBytes the driver keeps for itself (NVML's
	// nvmlDeviceGetMemoryInfo_v2 "reserved"): no container can allocate it. 0 when
	// ReservedKnown is false.
	ReservedBytes uint64
	// ReservedKnown is false when the library or the card cannot say what the driver reserves
	// (an older driver without nvmlDeviceGetMemoryInfo_v2): the whole total then looks usable.
	ReservedKnown bool
	// Minor is the /dev/nvidiaN minor number.
	Minor int
	// NUMANode is the card's NUMA node as NVML reports it, or NoNUMANode (NVML knows it only
	// where the platform makes GPUs NUMA nodes; the plugin then reads sysfs).
	NUMANode int
	// BusID is the card's PCI address as sysfs names it, lower-case with a 4-digit domain
	// ("0000:07:00.0"); empty when NVML did not say.
	BusID string
}

// Event is a critical XID reported by NVML for one GPU.
type Event struct {
	// UUID names the GPU; empty when NVML did not say which.
	UUID string
	// XID is the Xid error code.
	XID uint64
}

// UnknownUtilization is Usage.Utilization when NVML does not report it (not supported).
const UnknownUtilization = -1

// Usage is what one GPU is doing at the moment it is read.
type Usage struct {
	// UsedBytes is the memory in use on the card, by every process and the driver.
	UsedBytes uint64
	// FreeBytes is the memory no one holds (NVML's free): what is left to allocate.
	FreeBytes uint64
	// Utilization is the percent of the last sample period in which a kernel ran, or
	// UnknownUtilization.
	Utilization int
	// Processes are the compute processes on the card and their memory.
	Processes []Process
}

// Process is one process using a GPU.
type Process struct {
	// PID is the process ID in the host's PID namespace.
	PID uint32
	// UsedBytes is the GPU memory the process uses; 0 with UsedKnown false when NVML cannot say
	// (e.g. under MIG without privileges).
	UsedBytes uint64
	UsedKnown bool
}

// Interface is the library: Init before anything else, Shutdown at the end.
type Interface interface {
	// Init loads and initializes NVML; ErrLibraryNotFound when the library is missing.
	Init() error
	// Shutdown releases NVML.
	Shutdown() error
	// DeviceCount is the number of GPUs.
	DeviceCount() (int, error)
	// Device describes the GPU with NVML index i.
	Device(i int) (Device, error)
	// Usage reads the memory in use, the utilization and the compute processes of the GPU with
	// NVML index i.
	Usage(i int) (Usage, error)
	// WatchXIDs registers for critical XID events on the given GPUs (by UUID).
	WatchXIDs(uuids []string) (EventWaiter, error)
	// NVLinks lists the active NVLink links of the GPU with NVML index i and what each one
	// reaches; none for a card without NVLink (ErrNotSupported is not returned for that).
	NVLinks(i int) ([]NVLink, error)
	// CommonAncestor is how the GPUs with NVML indexes i and j reach each other over PCIe and
	// the CPUs: contract.LinkPIX (at most one PCIe switch) down to contract.LinkSYS (across
	// NUMA nodes).
	CommonAncestor(i, j int) (contract.Link, error)
}

// EventWaiter yields XID events; Close releases it.
type EventWaiter interface {
	// Wait blocks for at most timeout; ErrTimeout when nothing happened.
	Wait(timeout time.Duration) (Event, error)
	// Close frees the event set.
	Close() error
}

// UsableBytes is what a container can get of d: its total less what the driver keeps for
// itself (ReservedBytes) and reserve bytes the operator holds back; 0 when those take it all.
// Device-plugin mode and DRA mode both size a card by it.
func (d Device) UsableBytes(reserve uint64) uint64 {
	held := d.ReservedBytes + reserve
	if held >= d.MemoryBytes {
		return 0
	}
	return d.MemoryBytes - held
}
