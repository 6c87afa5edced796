// Package mockhost builds fake GPU hosts from go-nvml's mock servers (dgxa100, dgxh100, ...)
// with the details the plugin reads filled in: memory (the mocks' own values are overridden),
// stable UUIDs, NUMA nodes and an XID event set that tests can feed.
//
// It is for tests and for the fakenvml build of cmd/share-plugin; normal builds never import it.
package mockhost

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// ErrUnknownHost is returned by New for a host name it does not know.
var ErrUnknownHost = errors.New("unknown fake GPU host")

// hosts are the go-nvml mock servers by name.
func hosts() map[string]func() *server.Server {
	return map[string]func() *server.Server{
		"dgxa100": dgxa100.New,
		"dgxh100": dgxh100.New,
		"dgxh200": dgxh200.New,
		"dgxb200": dgxb200.New,
	}
}

// Names lists the hosts New accepts.
func Names() []string {
	var out []string
	for n := range hosts() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Host is a mock NVML library plus the handles to inject XID events and set what each GPU is
// doing (SetUsage, FollowProcessesFile).
type Host struct {
	*server.Server
	events chan gonvml.EventData
	mu     sync.Mutex
	usage  map[int]cardUsage // by NVML index; guarded by mu
	file   *processesFile    // the followed processes file, nil if none; guarded by mu
	xids   *xidFile          // the followed XID file, nil if none; guarded by mu
}

// cardUsage is what SetUsage says one GPU is doing.
type cardUsage struct {
	utilization uint32
	procs       []gonvml.ProcessInfo
}

// SetUsage makes GPU i report utilization (percent) and the compute processes procs (PID and
// bytes used); its memory in use becomes their sum. Safe to call while the library is read.
func (h *Host) SetUsage(i int, utilization uint32, procs []gonvml.ProcessInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.usage[i] = cardUsage{utilization: utilization, procs: slices.Clone(procs)}
}

// usageOf is what GPU i is doing: SetUsage's, with the processes of the followed file if any
// (and the file's error while it is bad).
func (h *Host) usageOf(i int) (cardUsage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	u := h.usage[i]
	if h.file == nil {
		return u, nil
	}
	h.file.refreshLocked(len(h.Devices))
	procs, err := h.file.processesOf(i)
	u.procs = procs
	return u, err
}

// Options shape a Host.
type Options struct {
	// MemoryBytes overrides every GPU's memory; MemoryByIndex overrides single GPUs.
	MemoryBytes   uint64
	MemoryByIndex map[int]uint64
	// ReservedBytes is what the driver keeps of every GPU's memory, as NVML's
	// nvmlDeviceGetMemoryInfo_v2 reports it (KAI-Scheduler#2212 measured about 450 MiB on a
	// T4); ReservedByIndex overrides single GPUs. Default 0, so that a card's units are its
	// whole memory, as before the driver's share was counted.
	ReservedBytes   uint64
	ReservedByIndex map[int]uint64
	// NoMemoryInfoV2 makes the library lack nvmlDeviceGetMemoryInfo_v2, as older drivers do:
	// what the driver reserves is then unknown.
	NoMemoryInfoV2 bool
	// GPUs keeps only the first GPUs of the host when > 0.
	GPUs int
	// Links shapes what NVML reports between the cards (topology.go): LinksNVSwitch (the
	// default), LinksPCIe or LinksPairs.
	Links string
}

// New builds the named host ("dgxa100", ...).
func New(name string, o Options) (*Host, error) {
	mk, ok := hosts()[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownHost, name, strings.Join(Names(), ", "))
	}
	layout, err := layoutOf(name, o.Links)
	if err != nil {
		return nil, err
	}
	s := mk()
	if o.GPUs > 0 && o.GPUs < len(s.Devices) {
		s.Devices = s.Devices[:o.GPUs]
	}
	h := &Host{Server: s, events: make(chan gonvml.EventData, 64), usage: map[int]cardUsage{}}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.UUID = fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", 0x6a5e0000+i, i)
		mem := dev.MemoryInfo.Total
		if o.MemoryBytes > 0 {
			mem = o.MemoryBytes
		}
		if m, ok := o.MemoryByIndex[i]; ok {
			mem = m
		}
		reserved := o.ReservedBytes
		if r, ok := o.ReservedByIndex[i]; ok {
			reserved = r
		}
		if reserved > mem {
			return nil, fmt.Errorf("%w: GPU %d: %d bytes reserved of %d", ErrBadOptions, i, reserved, mem)
		}
		dev.MemoryInfo = gonvml.Memory{Total: mem, Free: mem - reserved, Used: reserved}
		h.wireUsage(dev, i, mem, reserved)
		numa := i * 2 / len(s.Devices) // two sockets, first half on node 0
		dev.GetNumaNodeIdFunc = func() (int, gonvml.Return) { return numa, gonvml.SUCCESS }
		dev.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) {
			return gonvml.EventTypeXidCriticalError, gonvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.SUCCESS }
		layout.wire(dev, i, len(s.Devices))
	}
	s.EventSetCreateFunc = h.newEventSet
	if o.NoMemoryInfoV2 {
		s.LookupSymbolFunc = func(symbol string) error {
			if symbol == symMemoryInfoV2 {
				return fmt.Errorf("%w: %s", ErrNoSymbol, symbol)
			}
			return nil
		}
	}
	return h, nil
}

// symMemoryInfoV2 is the NVML call Options.NoMemoryInfoV2 takes away.
const symMemoryInfoV2 = "nvmlDeviceGetMemoryInfo_v2"

// ErrNoSymbol is what the library's LookupSymbol returns for a function it lacks.
var ErrNoSymbol = errors.New("symbol not found in the mock library")

// ErrBadOptions is returned by New for Options it cannot build a host from.
var ErrBadOptions = errors.New("bad mock host options")

// wireUsage makes GPU i (dev, of mem bytes of which the driver keeps reserved) report what
// SetUsage or the followed processes file say it is doing. As on real drivers,
// nvmlDeviceGetMemoryInfo counts the reserve as used and nvmlDeviceGetMemoryInfo_v2 reports it
// apart.
func (h *Host) wireUsage(dev *server.Device, i int, mem, reserved uint64) {
	used := func() uint64 {
		u, _ := h.usageOf(i) // the last good processes while the file is bad
		var sum uint64
		for _, p := range u.procs {
			sum += p.UsedGpuMemory
		}
		return sum
	}
	dev.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		u := used()
		return gonvml.Memory{Total: mem, Free: mem - reserved - min(u, mem-reserved), Used: reserved + u}, gonvml.SUCCESS
	}
	dev.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		u := used()
		return gonvml.Memory_v2{Total: mem, Reserved: reserved, Free: mem - reserved - min(u, mem-reserved), Used: u}, gonvml.SUCCESS
	}
	dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		u, _ := h.usageOf(i)
		return gonvml.Utilization{Gpu: u.utilization}, gonvml.SUCCESS
	}
	dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		u, err := h.usageOf(i)
		if err != nil {
			return nil, gonvml.ERROR_UNKNOWN
		}
		return slices.Clone(u.procs), gonvml.SUCCESS
	}
}

// InjectXID queues an XID event for the GPU with NVML index i.
func (h *Host) InjectXID(i int, xid uint64) {
	h.events <- gonvml.EventData{Device: h.Devices[i], EventType: gonvml.EventTypeXidCriticalError, EventData: xid}
}

// xidPollPeriod is how often a waiting event set reads the followed XID file.
const xidPollPeriod = 50 * time.Millisecond

func (h *Host) newEventSet() (gonvml.EventSet, gonvml.Return) {
	set := &mock.EventSet{}
	set.WaitFunc = func(ms uint32) (gonvml.EventData, gonvml.Return) {
		timer := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer timer.Stop()
		var poll <-chan time.Time // nil without an XID file: never fires
		if h.following() {
			ticker := time.NewTicker(xidPollPeriod)
			defer ticker.Stop()
			poll = ticker.C
			h.pollXIDs()
		}
		for {
			select {
			case ev := <-h.events:
				return ev, gonvml.SUCCESS
			case <-poll:
				h.pollXIDs()
			case <-timer.C:
				return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
			}
		}
	}
	set.FreeFunc = func() gonvml.Return { return gonvml.SUCCESS }
	return set, gonvml.SUCCESS
}
