package nvml

import (
	"errors"
	"fmt"
	"math"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// lib adapts a go-nvml Interface (the real library or a mock host) to Interface.
type lib struct {
	nv gonvml.Interface
}

var _ Interface = (*lib)(nil)

// New wraps a go-nvml Interface: gonvml.New() for the real library, a mock server in tests.
func New(nv gonvml.Interface) Interface { return &lib{nv: nv} }

// asError converts an NVML return code; SUCCESS is nil.
func asError(what string, ret gonvml.Return) error {
	if ret == gonvml.SUCCESS {
		return nil
	}
	if ret == gonvml.ERROR_LIBRARY_NOT_FOUND {
		return fmt.Errorf("%s: %w", what, ErrLibraryNotFound)
	}
	if ret == gonvml.ERROR_NOT_SUPPORTED {
		return fmt.Errorf("%s: %w (nvml error %d)", what, ErrNotSupported, int32(ret))
	}
	return fmt.Errorf("%s: nvml error %d: %s", what, int32(ret), ret.Error())
}

func (l *lib) Init() error     { return asError("nvml init", l.nv.Init()) }
func (l *lib) Shutdown() error { return asError("nvml shutdown", l.nv.Shutdown()) }

func (l *lib) DeviceCount() (int, error) {
	n, ret := l.nv.DeviceGetCount()
	return n, asError("device count", ret)
}

func (l *lib) Device(i int) (Device, error) {
	d, ret := l.nv.DeviceGetHandleByIndex(i)
	if err := asError(fmt.Sprintf("device %d handle", i), ret); err != nil {
		return Device{}, err
	}
	out := Device{Index: i, NUMANode: NoNUMANode}
	var err error
	if out.Index, ret = d.GetIndex(); ret != gonvml.SUCCESS {
		err = errors.Join(err, asError("index", ret))
	}
	if out.UUID, ret = d.GetUUID(); ret != gonvml.SUCCESS {
		err = errors.Join(err, asError("uuid", ret))
	}
	if out.Model, ret = d.GetName(); ret != gonvml.SUCCESS {
		err = errors.Join(err, asError("name", ret))
	}
	if out.MemoryBytes, out.ReservedBytes, out.ReservedKnown, ret = l.memoryOf(d); ret != gonvml.SUCCESS {
		err = errors.Join(err, asError("memory info", ret))
	}
	if out.Minor, ret = d.GetMinorNumber(); ret != gonvml.SUCCESS {
		err = errors.Join(err, asError("minor number", ret))
	}
	if l.hasSymbol(symNumaNodeID) {
		if numa, ret := d.GetNumaNodeId(); ret == gonvml.SUCCESS && numa >= 0 {
			out.NUMANode = numa
		}
	}
	if pci, ret := d.GetPciInfo(); ret == gonvml.SUCCESS {
		out.BusID = busIDOf(pci)
	}
	if err != nil {
		return Device{}, fmt.Errorf("device %d: %w", i, err)
	}
	return out, nil
}

// symMemoryInfoV2 is the call that reports what the driver reserves of a card's memory.
const symMemoryInfoV2 = "nvmlDeviceGetMemoryInfo_v2"

// memoryOf reads a card's total memory and what the driver reserves of it: from
// nvmlDeviceGetMemoryInfo_v2 where the library has it and the card answers, else the total of
// nvmlDeviceGetMemoryInfo with known false (go-nvml would call a missing function through a null
// pointer, so the symbol is looked up first).
func (l *lib) memoryOf(d gonvml.Device) (total, reserved uint64, known bool, ret gonvml.Return) {
	if l.hasSymbol(symMemoryInfoV2) {
		if m, ret := d.GetMemoryInfo_v2(); ret == gonvml.SUCCESS && m.Reserved <= m.Total {
			return m.Total, m.Reserved, true, gonvml.SUCCESS
		}
	}
	m, ret := d.GetMemoryInfo()
	return m.Total, 0, false, ret
}

// WatchXIDs registers every listed GPU that supports it for critical XID events.
func (l *lib) WatchXIDs(uuids []string) (EventWaiter, error) {
	set, ret := l.nv.EventSetCreate()
	if err := asError("event set create", ret); err != nil {
		return nil, err
	}
	for _, uuid := range uuids {
		d, ret := l.nv.DeviceGetHandleByUUID(uuid)
		if err := asError("device "+uuid, ret); err != nil {
			_ = set.Free()
			return nil, err
		}
		supported, ret := d.GetSupportedEventTypes()
		if ret != gonvml.SUCCESS || supported&gonvml.EventTypeXidCriticalError == 0 {
			continue // the caller logs GPUs without XID events through the returned error-free path
		}
		if err := asError("register events "+uuid, d.RegisterEvents(gonvml.EventTypeXidCriticalError, set)); err != nil {
			_ = set.Free()
			return nil, err
		}
	}
	return &waiter{set: set}, nil
}

// waiter wraps an NVML event set.
type waiter struct {
	set gonvml.EventSet
}

func (w *waiter) Wait(timeout time.Duration) (Event, error) {
	data, ret := w.set.Wait(millis32(timeout))
	if ret == gonvml.ERROR_TIMEOUT {
		return Event{}, ErrTimeout
	}
	if err := asError("event wait", ret); err != nil {
		return Event{}, err
	}
	ev := Event{XID: data.EventData}
	if data.Device != nil {
		if uuid, ret := data.Device.GetUUID(); ret == gonvml.SUCCESS {
			ev.UUID = uuid
		}
	}
	return ev, nil
}

// millis32 is d in whole milliseconds, as NVML's event wait takes it, clamped to
// [0, MaxUint32] (about 49 days) instead of wrapping around.
func millis32(d time.Duration) uint32 {
	ms := d.Milliseconds()
	if ms < 0 {
		return 0
	}
	if ms > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(ms)
}

func (w *waiter) Close() error { return asError("event set free", w.set.Free()) }

// valueNotAvailable is NVML's NVML_VALUE_NOT_AVAILABLE for unsigned 64-bit fields.
const valueNotAvailable = math.MaxUint64

// Usage reads memory, utilization and the compute processes of GPU i. Utilization that the
// card does not support is reported as UnknownUtilization, not as an error.
func (l *lib) Usage(i int) (Usage, error) {
	d, ret := l.nv.DeviceGetHandleByIndex(i)
	if err := asError(fmt.Sprintf("device %d handle", i), ret); err != nil {
		return Usage{}, err
	}
	mem, ret := d.GetMemoryInfo()
	if err := asError(fmt.Sprintf("device %d memory info", i), ret); err != nil {
		return Usage{}, err
	}
	out := Usage{UsedBytes: mem.Used, FreeBytes: mem.Free, Utilization: UnknownUtilization}
	switch rates, ret := d.GetUtilizationRates(); ret {
	case gonvml.SUCCESS:
		out.Utilization = int(rates.Gpu)
	case gonvml.ERROR_NOT_SUPPORTED:
	default:
		return Usage{}, asError(fmt.Sprintf("device %d utilization", i), ret)
	}
	procs, ret := d.GetComputeRunningProcesses()
	if err := asError(fmt.Sprintf("device %d compute processes", i), ret); err != nil {
		return Usage{}, err
	}
	for _, p := range procs {
		known := p.UsedGpuMemory != valueNotAvailable
		used := p.UsedGpuMemory
		if !known {
			used = 0
		}
		out.Processes = append(out.Processes, Process{PID: p.Pid, UsedBytes: used, UsedKnown: known})
	}
	return out, nil
}
