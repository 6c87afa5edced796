package usage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// ReasonOverRequest is the reason of the Warning event on a pod whose container uses more GPU
// memory than it asked.
const ReasonOverRequest = "GPUMemoryOverRequest"

// PodLister lists the pods bound to the plugin's node (deviceplugin.PodSource).
type PodLister interface {
	NodePods(ctx context.Context) ([]*v1.Pod, error)
}

// OwnerResolver maps a host PID to the pod and container it runs in (ProcReader).
type OwnerResolver interface {
	OwnerOf(pid uint32) (Owner, error)
}

// WarnFunc records a Warning event on a pod (deviceplugin.WarnPod).
type WarnFunc func(ctx context.Context, pod *v1.Pod, reason, message string) error

// ShareSource says what each container of a DRA node holds of each card: the memory of the
// claims prepared for it (dra.Driver.ContainerShares). A node's pods ask no gpu-mem there.
type ShareSource interface {
	// ContainerShares lists one entry per container of pods and card it holds a share of.
	ContainerShares(pods []*v1.Pod) []ContainerLimit
}

// Config is what a Sampler reads and where it reports.
type Config struct {
	NVML   nvml.Interface
	Pods   PodLister
	Owners OwnerResolver
	Names  contract.Names
	// Warn records the over-request and limit escape events; nil records none.
	Warn WarnFunc
	// MemoryLimit is how the node's plugin holds containers to their ask (contract.MemoryLimit*;
	// "" reads as none), and MemoryLimitConfigured what it was asked to do. Where containers are
	// held to their ask the sampler reports each one's limits, and records no over-request event
	// for a container with a limit (Escapes polices those).
	MemoryLimit, MemoryLimitConfigured string
	// Escapes polices the containers with a limit where the node enforces limits (escape.go);
	// nil polices none.
	Escapes *EscapePolicy
	// Shares, on a DRA node, is where what each container asked and its limits come from; nil
	// reads them from the pods' gpu-mem requests and placements (device-plugin mode).
	Shares ShareSource
	// Clock times the readings and Run's period; nil is the real clock.
	Clock clock.WithTicker
}

// Sampler reads the node's GPUs and their processes on demand (Sample) or periodically (Run),
// keeps the last reading for its Prometheus collector, and warns once per container that uses
// more GPU memory than it asked. Safe for concurrent use.
type Sampler struct {
	cfg   Config
	clock clock.WithTicker
	cards []nvml.Device

	mu      sync.Mutex
	last    Snapshot
	errors  float64
	warned  map[containerKey]bool // containers already warned about, by pod UID and name
	escapes escapeState           // what was seen escaping and done about it
}

// containerKey names one container of one pod.
type containerKey struct {
	pod       types.UID
	container string
}

// Snapshot is one reading of the node.
type Snapshot struct {
	// Time is when it was taken.
	Time time.Time
	// Cards are the GPUs that could be read, by NVML index.
	Cards []CardUsage
	// Containers are the containers using a GPU, sorted by namespace, pod and name.
	Containers []ContainerUsage
	// Limits are the memory limits of the node's gpu-mem containers, one per container and
	// card, where the node enforces them; sorted like Containers, then by card UUID.
	Limits []ContainerLimit
}

// CardUsage is one GPU's reading.
type CardUsage struct {
	Device nvml.Device
	nvml.Usage
	// OutsidePodsBytes is the memory of processes not in a container of the node's pods (host
	// processes, or processes whose memory or cgroup could not be read).
	OutsidePodsBytes uint64
}

// ContainerUsage is the GPU memory one container's processes use.
type ContainerUsage struct {
	Namespace, Pod, Container string
	PodUID                    types.UID
	// UsedBytes is its memory on each card, by card UUID.
	UsedBytes map[string]uint64
	// RequestedBytes is what it asked (its gpu-mem units); 0 for a container that asked none.
	RequestedBytes uint64
}

// TotalBytes is the container's memory over all its cards.
func (c *ContainerUsage) TotalBytes() uint64 {
	var t uint64
	for _, b := range c.UsedBytes {
		t += b
	}
	return t
}

// OverBytes is how much more than it asked the container uses (0 when within its ask).
func (c *ContainerUsage) OverBytes() uint64 {
	return c.TotalBytes() - min(c.TotalBytes(), c.RequestedBytes)
}

// New reads the node's GPUs once (their identity does not change while the plugin runs).
func New(cfg Config) (*Sampler, error) {
	n, err := cfg.NVML.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	s := &Sampler{cfg: cfg, clock: cfg.Clock, warned: map[containerKey]bool{}, escapes: newEscapeState()}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	for i := range n {
		d, err := cfg.NVML.Device(i)
		if err != nil {
			return nil, fmt.Errorf("usage: %w", err)
		}
		s.cards = append(s.cards, d)
	}
	return s, nil
}

// Run samples every period until ctx ends.
func (s *Sampler) Run(ctx context.Context, period time.Duration) {
	logger := klog.FromContext(ctx)
	t := s.clock.NewTicker(period)
	defer t.Stop()
	for {
		if _, err := s.Sample(ctx); err != nil {
			logger.Info("GPU usage sample incomplete", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Last returns the last complete or partial reading.
func (s *Sampler) Last() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Sample reads every GPU and attributes its processes to the node's containers, keeps the
// reading, polices the containers held to a limit (escape.go) and warns about the others that
// use more than their ask. A GPU that cannot be read is left out of the reading and reported in
// the error; the others still count.
func (s *Sampler) Sample(ctx context.Context) (Snapshot, error) {
	pods, err := s.cfg.Pods.NodePods(ctx)
	if err != nil {
		s.countError()
		return Snapshot{}, fmt.Errorf("usage: %w", err)
	}
	idx := indexPods(pods, &s.cfg.Names)
	var shares []ContainerLimit
	if s.cfg.Shares != nil {
		shares = s.cfg.Shares.ContainerShares(pods)
		idx.askedFrom(shares)
	}
	snap, procs, errs := s.read(idx)
	if s.enforcing() {
		snap.Limits = shares
		if s.cfg.Shares == nil {
			snap.Limits = s.limits(pods, idx)
		}
	}
	toWarn := s.keep(snap, idx, len(errs) > 0)
	s.police(ctx, idx, snap.Limits, procs, len(errs) > 0)
	for _, w := range toWarn {
		s.warn(ctx, w.pod, w.usage)
	}
	return snap, errors.Join(errs...)
}

// enforcing says whether the node holds containers to their limits.
func (s *Sampler) enforcing() bool { return s.cfg.MemoryLimit == contract.MemoryLimitHAMiCore }

// gpuProcess is one process on one card, in a container of the node's pods.
type gpuProcess struct {
	card nvml.Device
	pid  uint32
	// bytes is its memory on the card; 0 when NVML cannot say.
	bytes uint64
	key   containerKey
	// owner is its cgroup's pod and container, as the process is checked again before a kill.
	owner Owner
}

// read reads every card and attributes its processes to the node's containers.
func (s *Sampler) read(idx podIndex) (Snapshot, []gpuProcess, []error) {
	snap := Snapshot{Time: s.clock.Now()}
	containers := map[containerKey]*ContainerUsage{}
	var procs []gpuProcess
	var errs []error
	for _, d := range s.cards {
		u, err := s.cfg.NVML.Usage(d.Index)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		card := CardUsage{Device: d, Usage: u}
		for _, p := range u.Processes {
			c, owner := s.attribute(idx, p.PID, containers)
			if c == nil || !p.UsedKnown {
				card.OutsidePodsBytes += p.UsedBytes
			}
			if c == nil {
				continue
			}
			procs = append(procs, gpuProcess{card: d, pid: p.PID, bytes: p.UsedBytes,
				key: containerKey{pod: c.PodUID, container: c.Container}, owner: owner})
			if p.UsedKnown {
				c.UsedBytes[d.UUID] += p.UsedBytes
			}
		}
		snap.Cards = append(snap.Cards, card)
	}
	for _, c := range containers {
		snap.Containers = append(snap.Containers, *c)
	}
	sort.Slice(snap.Containers, func(i, j int) bool {
		a, b := &snap.Containers[i], &snap.Containers[j]
		return a.Namespace+"/"+a.Pod+"/"+a.Container < b.Namespace+"/"+b.Pod+"/"+b.Container
	})
	return snap, procs, errs
}

// podIndex finds the node's pods by UID and their containers by runtime ID, and holds the
// gpu-mem request of each pod whose request is valid and the GPU memory each of its
// containers asked.
type podIndex struct {
	byUID       map[types.UID]*v1.Pod
	byContainer map[string]containerRef
	requests    map[types.UID]contract.PodRequest
	asked       map[types.UID][]containerAsk
}

// containerAsk is the GPU memory one container asked, over all its cards.
type containerAsk struct {
	name  string
	bytes uint64
}

// containerRef is a container of a pod.
type containerRef struct {
	pod  *v1.Pod
	name string
}

func indexPods(pods []*v1.Pod, names *contract.Names) podIndex {
	idx := podIndex{byUID: map[types.UID]*v1.Pod{}, byContainer: map[string]containerRef{},
		requests: map[types.UID]contract.PodRequest{}, asked: map[types.UID][]containerAsk{}}
	unit := uint64(names.UnitBytes()) //nolint:gosec // G115: Names.Validate keeps the unit positive
	for _, p := range pods {
		idx.byUID[p.UID] = p
		if req, err := contract.ParseRequest(p, names); err == nil {
			idx.requests[p.UID] = req
			for _, c := range req.Containers {
				if c.Units > 0 {
					idx.asked[p.UID] = append(idx.asked[p.UID], containerAsk{name: c.Name, bytes: uint64(c.Units) * unit})
				}
			}
		}
		for _, statuses := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, st := range statuses {
				if _, id, ok := strings.Cut(st.ContainerID, "://"); ok && id != "" {
					idx.byContainer[id] = containerRef{pod: p, name: st.Name}
				}
			}
		}
	}
	return idx
}

// attribute returns the usage record of the container process pid runs in (creating it) and
// the owner its cgroup names, or nil when the process is not in a container of the node's pods.
func (s *Sampler) attribute(idx podIndex, pid uint32, containers map[containerKey]*ContainerUsage) (*ContainerUsage, Owner) {
	owner, err := s.cfg.Owners.OwnerOf(pid)
	if err != nil {
		return nil, Owner{}
	}
	ref, ok := idx.byContainer[owner.ContainerID]
	if !ok {
		pod := idx.byUID[types.UID(owner.PodUID)]
		if pod == nil {
			return nil, Owner{}
		}
		ref = containerRef{pod: pod, name: idx.onlyGPUContainer(pod.UID)} // "" when it cannot tell
	}
	key := containerKey{pod: ref.pod.UID, container: ref.name}
	if c, ok := containers[key]; ok {
		return c, owner
	}
	c := &ContainerUsage{Namespace: ref.pod.Namespace, Pod: ref.pod.Name, Container: ref.name, PodUID: ref.pod.UID,
		UsedBytes: map[string]uint64{}, RequestedBytes: idx.requested(ref.pod.UID, ref.name)}
	containers[key] = c
	return c, owner
}

// askedFrom replaces what the containers asked with the sum of their shares (a DRA node's).
func (idx *podIndex) askedFrom(shares []ContainerLimit) {
	idx.asked = map[types.UID][]containerAsk{}
	for _, l := range shares {
		asks := idx.asked[l.PodUID]
		i := slices.IndexFunc(asks, func(a containerAsk) bool { return a.name == l.Container })
		if i < 0 {
			i = len(asks)
			asks = append(asks, containerAsk{name: l.Container})
		}
		asks[i].bytes += l.Bytes
		idx.asked[l.PodUID] = asks
	}
}

// onlyGPUContainer names the pod's one container that asked GPU memory, or "" when it has none
// or several.
func (idx podIndex) onlyGPUContainer(uid types.UID) string {
	if asks := idx.asked[uid]; len(asks) == 1 {
		return asks[0].name
	}
	return ""
}

// requested is the GPU memory container name of the pod asked, in bytes (0 if none).
func (idx podIndex) requested(uid types.UID, name string) uint64 {
	for _, a := range idx.asked[uid] {
		if a.name == name {
			return a.bytes
		}
	}
	return 0
}

// pendingWarning is an over-request event to record.
type pendingWarning struct {
	pod   *v1.Pod
	usage ContainerUsage
}

// keep stores snap as the last reading and returns the containers over their ask that were
// not warned about yet. Where the node enforces limits a container with a limit is not warned
// about (usage above the ask is its CUDA context; what goes beyond is an escape, escape.go), one
// without (it asked no GPU memory, or has no placement) still is. Containers of pods gone from
// the node are forgotten, unless the reading is partial (a card could not be read), which
// proves nothing about them.
func (s *Sampler) keep(snap Snapshot, idx podIndex, partial bool) []pendingWarning {
	limited := map[containerKey]bool{}
	for _, l := range snap.Limits {
		limited[containerKey{pod: l.PodUID, container: l.Container}] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = snap
	if partial {
		s.errors++
	}
	var out []pendingWarning
	for _, c := range snap.Containers {
		key := containerKey{pod: c.PodUID, container: c.Container}
		if c.OverBytes() == 0 || s.warned[key] || limited[key] {
			continue
		}
		s.warned[key] = true
		out = append(out, pendingWarning{pod: idx.byUID[c.PodUID], usage: c})
	}
	for key := range s.warned {
		if _, ok := idx.byUID[key.pod]; !ok && !partial {
			delete(s.warned, key)
		}
	}
	return out
}

func (s *Sampler) countError() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors++
}

// warn records the over-request event of one container.
func (s *Sampler) warn(ctx context.Context, pod *v1.Pod, c ContainerUsage) {
	logger := klog.FromContext(ctx)
	name := c.Container
	if name == "" {
		name = "(unknown)"
	}
	msg := fmt.Sprintf("container %s uses %s of GPU memory on %s, more than the %s it asked (%s of %s)",
		name, bytesLabel(c.TotalBytes()), cardList(c.UsedBytes), bytesLabel(c.RequestedBytes),
		unitsLabel(c.RequestedBytes, s.cfg.Names.UnitBytes()), s.cfg.Names.Resource)
	logger.Info("Container uses more GPU memory than it asked", "pod", klog.KObj(pod), "container", name,
		"usedBytes", c.TotalBytes(), "requestedBytes", c.RequestedBytes)
	if s.cfg.Warn == nil {
		return
	}
	if err := s.cfg.Warn(ctx, pod, ReasonOverRequest, msg); err != nil {
		logger.Info("Could not record the over-request event", "pod", klog.KObj(pod), "err", err)
	}
}

func bytesLabel(b uint64) string {
	return resource.NewQuantity(int64(b), resource.BinarySI).String() //nolint:gosec // G115: GPU memory fits int64
}

func unitsLabel(b uint64, unit int64) string {
	if unit <= 0 {
		return "0"
	}
	return strconv.FormatUint(b/uint64(unit), 10)
}

func cardList(used map[string]uint64) string {
	uuids := make([]string, 0, len(used))
	for u := range used {
		uuids = append(uuids, u)
	}
	sort.Strings(uuids)
	return strings.Join(uuids, ", ")
}
