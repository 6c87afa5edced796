package usage

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ReasonLimitEscaped is the reason of the Warning event on a pod whose container escaped its
// GPU memory limit: it uses more than its limit and the CUDA context allowance on a card, or
// one of its GPU processes runs without HAMi-core.
const ReasonLimitEscaped = "GPUMemoryLimitEscaped"

// What is done to a container's processes that escaped (--limit-escape-action).
//
// Kill is the default: the escaped processes hold GPU memory that the card's other tenants were
// promised, and they run out of memory for as long as it is held. A SIGKILL frees it at once (the
// driver tears the contexts down when the process exits); the container restarts as its
// restartPolicy says, and the event says why. Eviction would hold the memory for the pod's whole
// termination grace period, and the plugin may not evict (its RBAC and the admission policy of
// config/admission/share-plugin-pods.yaml refuse it), so it is not offered.
const (
	EscapeActionKill = "kill"
	EscapeActionNone = "none"
)

// Kinds of escape, the kind label of gpushare_container_limit_escapes_total.
const (
	// EscapeOverLimit: the container's processes on a card use more than its limit there plus
	// the context allowance of each.
	EscapeOverLimit = "over_limit"
	// EscapeNoHAMiCore: a GPU process of a container held to a limit does not map HAMi-core
	// (static binary, /etc/ld.so.preload unmounted or bypassed, another mount namespace).
	EscapeNoHAMiCore = "no_hami_core"
)

// Results of an action on one process, the result label of gpushare_limit_escape_actions_total.
const (
	resultKilled = "killed"
	resultGone   = "gone"
	resultFailed = "failed"
)

// DefaultContextAllowanceBytes is the GPU memory each process may use beyond its container's
// limit: its CUDA context, which the driver allocates outside HAMi-core's accounting. make
// gpu-check measures a context on the machine's card and checks that it fits in this.
const DefaultContextAllowanceBytes = 512 << 20

// EscapePolicy is how the sampler polices, from the host, the containers that the node holds to
// a GPU memory limit: nothing in a container can lie to NVML's process list, the processes'
// cgroups or their memory maps, as it can to HAMi-core (its env, its counter file, its preload).
type EscapePolicy struct {
	// Action is EscapeActionKill or EscapeActionNone (the escape is still reported).
	Action string
	// ContextAllowanceBytes is what each of a container's processes on a card may use beyond
	// the container's limit there (DefaultContextAllowanceBytes).
	ContextAllowanceBytes uint64
	// Library is HAMi-core's path, as the events name it.
	Library string
	// Interposer tells whether a process maps HAMi-core; nil checks none.
	Interposer InterposerProbe
	// Killer kills processes when Action is EscapeActionKill.
	Killer Killer
	// View tells whether processes see the plugin's preload list and library (preload_view.go);
	// nil checks none.
	View ViewProbe
}

// NewProcPolicy polices through the host's proc filesystem at root: processes' maps are read
// for the HAMi-core library at library and processes are killed through their /proc entry. The
// error says what could not be checked; the policy it comes with still works (the library is
// then recognized by path only).
func NewProcPolicy(root, library, action string, allowanceBytes uint64) (*EscapePolicy, error) {
	lib, err := IdentifyLibrary(library)
	return &EscapePolicy{Action: action, ContextAllowanceBytes: allowanceBytes, Library: library,
		Interposer: MapsProbe{Root: root, Library: lib}, Killer: ProcKiller{Root: root}}, err
}

// ValidateEscapeAction reports an unknown action.
func ValidateEscapeAction(action string) error {
	if action != EscapeActionKill && action != EscapeActionNone {
		return fmt.Errorf("limit escape action %q: want %s or %s", action, EscapeActionKill, EscapeActionNone)
	}
	return nil
}

// escape is one container found beyond its limit on one card this reading.
type escape struct {
	key  escapeKey
	pod  *v1.Pod
	card string // the card's index and UUID, for messages
	why  string // for EscapePreload: what the process sees instead of the plugin's files
	// offenders are the processes acted on: all of the container's on the card when over its
	// limit, those without HAMi-core otherwise.
	offenders              []gpuProcess
	used, limit, allowance uint64
	// fresh: a process is among the offenders that was not seen escaping before; the escape is
	// then counted and reported.
	fresh bool
}

// escapeKey names one kind of escape of one container on one card.
type escapeKey struct {
	containerKey
	uuid, kind string
}

// police finds the escapes of this reading, acts on them and reports the fresh ones. Nothing
// is policed where the node does not enforce limits.
func (s *Sampler) police(ctx context.Context, idx podIndex, limits []ContainerLimit, procs []gpuProcess, partial bool) {
	if s.cfg.Escapes == nil || !s.enforcing() {
		return
	}
	escapes := append(s.findEscapes(ctx, idx, limits, procs), s.findViewEscapes(ctx, idx, limits)...)
	pending := s.beginEscapes(escapes)
	results := s.act(ctx, pending)
	s.endEscapes(escapes, results, idx, partial)
	for i := range escapes {
		if escapes[i].fresh {
			s.reportEscape(ctx, &escapes[i], results)
		}
	}
}

// cardGroup is the processes of one container on one card.
type cardGroup struct {
	key   containerKey
	card  string
	uuid  string
	procs []gpuProcess
}

// findEscapes checks every container with a limit: on each card, each process for HAMi-core,
// and their memory against the limit there plus the allowance. Containers are taken in name
// order, and cards in index order.
func (s *Sampler) findEscapes(ctx context.Context, idx podIndex, limits []ContainerLimit, procs []gpuProcess) []escape {
	limitOf, policed := map[escapeKey]uint64{}, map[containerKey]bool{}
	for _, l := range limits {
		k := containerKey{pod: l.PodUID, container: l.Container}
		limitOf[escapeKey{containerKey: k, uuid: l.UUID}], policed[k] = l.Bytes, true
	}
	groups := groupProcesses(idx, procs, policed)
	var out []escape
	loaded := map[uint32]bool{} // a process on several cards is read once
	for _, g := range groups {
		base := escape{pod: idx.byUID[g.key.pod], card: g.card, limit: limitOf[escapeKey{containerKey: g.key, uuid: g.uuid}]}
		for _, p := range g.procs {
			base.used += p.bytes
		}
		if missing := s.withoutHAMiCore(ctx, g.procs, loaded); len(missing) > 0 {
			e := base
			e.key, e.offenders = escapeKey{containerKey: g.key, uuid: g.uuid, kind: EscapeNoHAMiCore}, missing
			out = append(out, e)
		}
		if _, ok := limitOf[escapeKey{containerKey: g.key, uuid: g.uuid}]; !ok {
			continue // a card it has no limit on: its memory there is not measured against one
		}
		e := base
		e.key, e.offenders = escapeKey{containerKey: g.key, uuid: g.uuid, kind: EscapeOverLimit}, g.procs
		e.allowance = s.cfg.Escapes.ContextAllowanceBytes * uint64(len(g.procs))
		if e.used > e.limit+e.allowance {
			out = append(out, e)
		}
	}
	return out
}

// groupProcesses groups the processes of the policed containers by container and card, ordered
// by namespace, pod, container and card index.
func groupProcesses(idx podIndex, procs []gpuProcess, policed map[containerKey]bool) []cardGroup {
	byKey := map[escapeKey]*cardGroup{}
	var out []*cardGroup
	for _, p := range procs {
		if idx.byUID[p.key.pod] == nil || !policed[p.key] {
			continue
		}
		k := escapeKey{containerKey: p.key, uuid: p.card.UUID}
		g, ok := byKey[k]
		if !ok {
			g = &cardGroup{key: p.key, uuid: p.card.UUID, card: fmt.Sprintf("GPU %d (%s)", p.card.Index, p.card.UUID)}
			byKey[k] = g
			out = append(out, g)
		}
		g.procs = append(g.procs, p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := idx.byUID[out[i].key.pod], idx.byUID[out[j].key.pod]
		if ka, kb := a.Namespace+"/"+a.Name+"/"+out[i].key.container, b.Namespace+"/"+b.Name+"/"+out[j].key.container; ka != kb {
			return ka < kb
		}
		return out[i].procs[0].card.Index < out[j].procs[0].card.Index
	})
	groups := make([]cardGroup, len(out))
	for i, g := range out {
		groups[i] = *g
	}
	return groups
}

// withoutHAMiCore returns the processes that do not map HAMi-core; a process whose maps cannot
// be read is not one (it has exited, or the plugin lacks CAP_SYS_PTRACE: counted and logged).
func (s *Sampler) withoutHAMiCore(ctx context.Context, procs []gpuProcess, loaded map[uint32]bool) []gpuProcess {
	probe := s.cfg.Escapes.Interposer
	if probe == nil {
		return nil
	}
	var out []gpuProcess
	for _, p := range procs {
		ok, seen := loaded[p.pid]
		if !seen {
			var err error
			if ok, err = probe.Loaded(p.pid); err != nil {
				s.checkFailed(ctx, p.pid, err)
				ok = true
			}
			loaded[p.pid] = ok
		}
		if !ok {
			out = append(out, p)
		}
	}
	return out
}

// checkFailed counts and logs a process whose maps could not be read; the first such failure
// is logged at the default level, as it usually means the plugin may not read them.
func (s *Sampler) checkFailed(ctx context.Context, pid uint32, err error) {
	if errors.Is(err, ErrProcessGone) {
		return
	}
	s.mu.Lock()
	first := s.escapes.checkErrors == 0
	s.escapes.checkErrors++
	s.mu.Unlock()
	logger := klog.FromContext(ctx)
	if first {
		logger.Error(err, "Cannot tell whether a GPU process runs with HAMi-core (the plugin needs CAP_SYS_PTRACE and the host's /proc); it is not policed for that", "pid", pid)
		return
	}
	logger.V(4).Info("Cannot read a GPU process's maps", "pid", pid, "err", err)
}

// act applies the action to the processes pending (those not yet dealt with), each once, and
// returns each one's result (resultKilled, resultGone or a failure).
func (s *Sampler) act(ctx context.Context, pending []gpuProcess) map[uint32]error {
	results := map[uint32]error{}
	p := s.cfg.Escapes
	if p.Action != EscapeActionKill || p.Killer == nil {
		return results
	}
	for _, proc := range pending {
		if _, done := results[proc.pid]; done {
			continue
		}
		err := p.Killer.Kill(proc.pid, proc.owner)
		results[proc.pid] = err
		klog.FromContext(ctx).V(2).Info("Killed a process that escaped its GPU memory limit", "pid", proc.pid,
			"podUID", proc.key.pod, "container", proc.key.container, "err", err)
	}
	return results
}

// resultOf is the label of an action's outcome.
func resultOf(err error) string {
	switch {
	case err == nil:
		return resultKilled
	case errors.Is(err, ErrProcessGone), errors.Is(err, ErrOwnerChanged):
		return resultGone
	default:
		return resultFailed
	}
}

// reportEscape logs one fresh escape and records its event: the container, the card, its use,
// its limit and what was done.
func (s *Sampler) reportEscape(ctx context.Context, e *escape, results map[uint32]error) {
	name := e.key.container
	action := s.actionText(e, results)
	var what string
	switch e.key.kind {
	case EscapePreload:
		what = fmt.Sprintf("container %s does not see the share-plugin's %s and HAMi-core library: %s (process %s), so the programs it starts run without its GPU memory limit of %s",
			name, ContainerPreloadPath, e.why, pidList(e.offenders), mibLabel(e.limit))
	case EscapeNoHAMiCore:
		what = fmt.Sprintf("container %s runs on the GPU without HAMi-core: process %s on %s does not map %s "+
			"(the library its /etc/ld.so.preload names: the preload was removed or bypassed, or the program is static), so its limit of %s there is not enforced",
			name, pidList(e.offenders), e.card, s.cfg.Escapes.Library, mibLabel(e.limit))
	default:
		what = fmt.Sprintf("container %s escaped its GPU memory limit: it uses %s on %s, more than its limit of %s plus %s of CUDA context allowance (%s for each of its %s)",
			name, mibLabel(e.used), e.card, mibLabel(e.limit), mibLabel(e.allowance), mibLabel(s.cfg.Escapes.ContextAllowanceBytes), processes(len(e.offenders)))
	}
	msg := what + "; " + action
	klog.FromContext(ctx).Info("Container escaped its GPU memory limit", "pod", klog.KObj(e.pod), "container", name,
		"gpu", e.key.uuid, "kind", e.key.kind, "usedBytes", e.used, "limitBytes", e.limit, "allowanceBytes", e.allowance,
		"pids", pidList(e.offenders), "action", s.cfg.Escapes.Action, "result", action)
	if s.cfg.Warn == nil {
		return
	}
	if err := s.cfg.Warn(ctx, e.pod, ReasonLimitEscaped, msg); err != nil {
		klog.FromContext(ctx).Info("Could not record the limit escape event", "pod", klog.KObj(e.pod), "err", err)
	}
}

// actionText says what was done to the escape's processes.
func (s *Sampler) actionText(e *escape, results map[uint32]error) string {
	if s.cfg.Escapes.Action != EscapeActionKill {
		return "action: none (--limit-escape-action=" + s.cfg.Escapes.Action + ")"
	}
	var killed, gone, failed []string
	for _, p := range e.offenders {
		err, acted := results[p.pid]
		id := fmt.Sprint(p.pid)
		switch {
		case !acted || resultOf(err) == resultKilled: // not acted on: killed by an earlier reading
			killed = append(killed, id)
		case resultOf(err) == resultGone:
			gone = append(gone, id)
		default:
			failed = append(failed, id+" ("+err.Error()+")")
		}
	}
	var parts []string
	if len(killed) > 0 {
		parts = append(parts, "action: killed process "+strings.Join(killed, ", ")+" (SIGKILL); the container restarts as its restartPolicy says")
	}
	if len(gone) > 0 {
		parts = append(parts, "process "+strings.Join(gone, ", ")+" had already exited")
	}
	if len(failed) > 0 {
		parts = append(parts, "action: kill FAILED for process "+strings.Join(failed, ", "))
	}
	return strings.Join(parts, "; ")
}

// mibLabel is b in MiB, the unit of HAMi-core's limits ("4096 MiB"), with a tenth where it is
// not a whole number.
func mibLabel(b uint64) string {
	if b%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// processes counts processes in words.
func processes(n int) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}

// pidList is the processes' PIDs, comma-separated.
func pidList(procs []gpuProcess) string {
	ids := make([]string, len(procs))
	for i, p := range procs {
		ids[i] = fmt.Sprint(p.pid)
	}
	return strings.Join(ids, ", ")
}
