package usage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/contract"
)

const (
	libPath = "/usr/local/gpushare/hami-core/libvgpu.so"
	mib     = uint64(1) << 20
)

// killLog is a Killer that records its calls and the clock's time of each.
type killLog struct {
	clock interface{ Now() time.Time }
	fail  map[uint32]error

	mu    sync.Mutex
	calls []string
	at    []time.Time
	ch    chan struct{}
}

func (k *killLog) Kill(pid uint32, owner Owner) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, fmt.Sprintf("%d %s/%s", pid, owner.PodUID, owner.ContainerID))
	if k.clock != nil {
		k.at = append(k.at, k.clock.Now())
	}
	if k.ch != nil {
		k.ch <- struct{}{}
	}
	return k.fail[pid]
}

func (k *killLog) list() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

// probe is an InterposerProbe: PIDs listed in without run without HAMi-core, those in errs
// cannot be read, the others map it.
type probe struct {
	without map[uint32]bool
	errs    map[uint32]error
}

func (p probe) Loaded(pid uint32) (bool, error) {
	if err := p.errs[pid]; err != nil {
		return false, err
	}
	return !p.without[pid], nil
}

// limitedPod is gpuPod with its units placed on card gpu.
func limitedPod(name, cid string, units int64, gpu int) *v1.Pod {
	p := gpuPod(name, cid, units)
	p.Annotations = map[string]string{contract.AnnotationAllocation: fmt.Sprintf(`{"0":{"%d":%d}}`, gpu, units)}
	return p
}

// policed turns the fixture's node into one that enforces limits and polices escapes.
func (f *fixture) policed(action string, k *killLog, p probe) {
	f.s.cfg.MemoryLimit, f.s.cfg.MemoryLimitConfigured = contract.MemoryLimitHAMiCore, contract.MemoryLimitHAMiCore
	f.s.cfg.Escapes = &EscapePolicy{Action: action, ContextAllowanceBytes: DefaultContextAllowanceBytes, Library: libPath,
		Interposer: p, Killer: k}
}

func TestEscapes(t *testing.T) {
	own := Owner{PodUID: "uid-a", ContainerID: "cid-a"}
	tests := []struct {
		name       string
		action     string
		mode       string // the node's memory limit mode; hami-core when empty
		units      int64  // asked and placed on card 0 (0: asks none, no limit)
		procs      []gonvml.ProcessInfo
		without    map[uint32]bool
		probeErrs  map[uint32]error
		killErr    error
		wantKills  []string
		wantEvents []string
	}{
		{
			name: "within the limit and the allowance of one process", action: EscapeActionKill, units: 4,
			procs: []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 4*gib + 512*mib}},
		},
		{
			name: "one byte over the limit plus one allowance: killed", action: EscapeActionKill, units: 4,
			procs:     []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 4*gib + 512*mib + 1}},
			wantKills: []string{"10 uid-a/cid-a"},
			wantEvents: []string{"a GPUMemoryLimitEscaped: container main escaped its GPU memory limit: it uses 4608.0 MiB on GPU 0 (" + uuid0 +
				"), more than its limit of 4096 MiB plus 512 MiB of CUDA context allowance (512 MiB for each of its 1 process); action: killed process 10 (SIGKILL); the container restarts as its restartPolicy says"},
		},
		{
			name: "two processes get two allowances", action: EscapeActionKill, units: 4,
			procs: []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 3 * gib}, {Pid: 11, UsedGpuMemory: 2 * gib}},
		},
		{
			name: "two processes over: both killed", action: EscapeActionKill, units: 4,
			procs:     []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 3 * gib}, {Pid: 11, UsedGpuMemory: 2*gib + 1}},
			wantKills: []string{"10 uid-a/cid-a", "11 uid-a/cid-a"},
			wantEvents: []string{"a GPUMemoryLimitEscaped: container main escaped its GPU memory limit: it uses 5120.0 MiB on GPU 0 (" + uuid0 +
				"), more than its limit of 4096 MiB plus 1024 MiB of CUDA context allowance (512 MiB for each of its 2 processes); action: killed process 10, 11 (SIGKILL); the container restarts as its restartPolicy says"},
		},
		{
			name: "a process without HAMi-core, within the limit: killed alone", action: EscapeActionKill, units: 4,
			procs:     []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: gib}, {Pid: 11, UsedGpuMemory: gib}},
			without:   map[uint32]bool{11: true},
			wantKills: []string{"11 uid-a/cid-a"},
			wantEvents: []string{"a GPUMemoryLimitEscaped: container main runs on the GPU without HAMi-core: process 11 on GPU 0 (" + uuid0 +
				") does not map " + libPath + " (the library its /etc/ld.so.preload names: the preload was removed or bypassed, or the program is static), so its limit of 4096 MiB there is not enforced; action: killed process 11 (SIGKILL); the container restarts as its restartPolicy says"},
		},
		{
			name: "maps that cannot be read are not an escape", action: EscapeActionKill, units: 4,
			procs:     []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: gib}},
			probeErrs: map[uint32]error{10: errors.New("permission denied")},
		},
		{
			name: "action none: reported, not killed", action: EscapeActionNone, units: 2,
			procs: []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 3 * gib}},
			wantEvents: []string{"a GPUMemoryLimitEscaped: container main escaped its GPU memory limit: it uses 3072 MiB on GPU 0 (" + uuid0 +
				"), more than its limit of 2048 MiB plus 512 MiB of CUDA context allowance (512 MiB for each of its 1 process); action: none (--limit-escape-action=none)"},
		},
		{
			name: "the kill fails: the event says so", action: EscapeActionKill, units: 2,
			procs:     []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 3 * gib}},
			killErr:   errors.New("pid 10: kill: operation not permitted"),
			wantKills: []string{"10 uid-a/cid-a"},
			wantEvents: []string{"a GPUMemoryLimitEscaped: container main escaped its GPU memory limit: it uses 3072 MiB on GPU 0 (" + uuid0 +
				"), more than its limit of 2048 MiB plus 512 MiB of CUDA context allowance (512 MiB for each of its 1 process); action: kill FAILED for process 10 (pid 10: kill: operation not permitted)"},
		},
		{
			name: "a node that does not enforce: the over-request warning, no kill", action: EscapeActionKill, mode: contract.MemoryLimitNone, units: 2,
			procs:      []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 3 * gib}},
			without:    map[uint32]bool{10: true},
			wantEvents: []string{"a GPUMemoryOverRequest: container main uses 3Gi of GPU memory on " + uuid0 + ", more than the 2Gi it asked (2 of aliyun.com/gpu-mem)"},
		},
		{
			name: "a container without a limit on an enforcing node: warned, not policed", action: EscapeActionKill, units: 0,
			procs:      []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: gib}},
			without:    map[uint32]bool{10: true},
			wantEvents: []string{"a GPUMemoryOverRequest: container main uses 1Gi of GPU memory on " + uuid0 + ", more than the 0 it asked (0 of aliyun.com/gpu-mem)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			k := &killLog{fail: map[uint32]error{}}
			f.policed(tt.action, k, probe{without: tt.without, errs: tt.probeErrs})
			if tt.mode != "" {
				f.s.cfg.MemoryLimit = tt.mode
			}
			f.pods.set(limitedPod("a", "cid-a", tt.units, 0))
			for _, p := range tt.procs {
				f.owners[p.Pid] = own
				k.fail[p.Pid] = tt.killErr
			}
			f.host.SetUsage(0, 50, tt.procs)
			for range 2 { // the second reading repeats no event and kills no more than a failed kill again
				if _, err := f.s.Sample(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			wantKills := tt.wantKills
			if tt.killErr != nil {
				wantKills = append(wantKills, wantKills...) // tried again
			}
			if diff := cmp.Diff(wantKills, k.list()); diff != "" {
				t.Errorf("kills (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEvents, f.events.list()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestEscapeMetrics: the escapes and the actions are counted once per new offending process,
// and a container's count goes with its pod.
func TestEscapeMetrics(t *testing.T) {
	f := newFixture(t)
	k := &killLog{fail: map[uint32]error{11: fmt.Errorf("pid 11: %w", ErrProcessGone)}}
	f.policed(EscapeActionKill, k, probe{without: map[uint32]bool{12: true}, errs: map[uint32]error{13: errors.New("permission denied")}})
	a, b := limitedPod("a", "cid-a", 2, 0), limitedPod("b", "cid-b", 2, 1)
	f.pods.set(a, b)
	f.owners[10] = Owner{PodUID: "uid-a", ContainerID: "cid-a"}
	f.owners[11] = Owner{PodUID: "uid-a", ContainerID: "cid-a"}
	f.owners[12] = Owner{PodUID: "uid-b", ContainerID: "cid-b"}
	f.owners[13] = Owner{PodUID: "uid-b", ContainerID: "cid-b"}
	f.host.SetUsage(0, 0, []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 3 * gib}})
	f.host.SetUsage(1, 0, []gonvml.ProcessInfo{{Pid: 12, UsedGpuMemory: gib}, {Pid: 13, UsedGpuMemory: gib}})
	sample := func() {
		t.Helper()
		if _, err := f.s.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	sample()
	sample() // the same processes: nothing new
	// a's container restarted (the kill) and escapes again with a new process, which exits first
	f.host.SetUsage(0, 0, []gonvml.ProcessInfo{{Pid: 11, UsedGpuMemory: 3 * gib}})
	sample()
	expected := `
# HELP gpushare_container_limit_escapes_total Times the container escaped its GPU memory limit, seen from the host: kind over_limit (its processes on a card use more than its limit plus the CUDA context allowance), no_hami_core (a GPU process does not map HAMi-core) or preload_changed (a process does not see the plugin's /etc/ld.so.preload or library: a symlink, a mount over them, a mount namespace of its own). A reading counts when it finds an offending process not seen before; forgotten when the pod leaves the node.
# TYPE gpushare_container_limit_escapes_total counter
gpushare_container_limit_escapes_total{container="main",kind="no_hami_core",namespace="team",pod="b"} 1
gpushare_container_limit_escapes_total{container="main",kind="over_limit",namespace="team",pod="a"} 2
# HELP gpushare_limit_escape_actions_total Processes of escaped containers acted on (--limit-escape-action), by result: killed, gone (exited or no longer in the container before the signal) or failed.
# TYPE gpushare_limit_escape_actions_total counter
gpushare_limit_escape_actions_total{action="kill",result="gone"} 1
gpushare_limit_escape_actions_total{action="kill",result="killed"} 2
# HELP gpushare_limit_escape_check_errors_total GPU processes of limited containers whose memory maps could not be read (so not checked for HAMi-core).
# TYPE gpushare_limit_escape_check_errors_total counter
gpushare_limit_escape_check_errors_total 3
`
	names := []string{"gpushare_container_limit_escapes_total", "gpushare_limit_escape_actions_total", "gpushare_limit_escape_check_errors_total"}
	if err := testutil.CollectAndCompare(f.s, strings.NewReader(expected), names...); err != nil {
		t.Error(err)
	}
	if diff := cmp.Diff([]string{"10 uid-a/cid-a", "12 uid-b/cid-b", "11 uid-a/cid-a"}, k.list()); diff != "" {
		t.Errorf("kills (-want,+got):\n%s", diff)
	}
	if n := len(f.events.list()); n != 3 {
		t.Errorf("%d events, want 3: %v", n, f.events.list())
	}
	f.pods.set(b)
	f.host.SetUsage(0, 0, nil)
	sample()
	if got := testutil.CollectAndCount(f.s, "gpushare_container_limit_escapes_total"); got != 1 {
		t.Errorf("%d escape series after pod a left, want 1 (b's)", got)
	}
}

// TestEscapeKilledWithinOnePeriod measures, on the sampler's own clock, the time from a
// container's overrun to the kill: at most one --usage-period, whenever in the period the
// overrun starts.
func TestEscapeKilledWithinOnePeriod(t *testing.T) {
	const period = 5 * time.Second
	tests := []struct {
		name  string
		after time.Duration // the overrun starts this long after a reading
	}{
		{name: "right after a reading", after: time.Millisecond},
		{name: "mid-period", after: period / 2},
		{name: "right before a reading", after: period - time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
			k := &killLog{clock: clk, ch: make(chan struct{}, 1)}
			f.policed(EscapeActionKill, k, probe{})
			f.s.clock = clk
			f.pods.set(limitedPod("a", "cid-a", 4, 0))
			f.owners[10] = Owner{PodUID: "uid-a", ContainerID: "cid-a"}
			f.host.SetUsage(0, 0, []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 4 * gib}})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { f.s.Run(ctx, period); close(done) }()
			defer func() { cancel(); clk.Step(period); <-done }()
			waitFor(t, func() bool { return clk.HasWaiters() && !f.s.Last().Time.IsZero() }) // the first reading is in
			clk.Step(tt.after)
			start := clk.Now()
			f.host.SetUsage(0, 0, []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 8 * gib}}) // the overrun
			wall := time.Now()
			clk.Step(period - tt.after) // the next tick: one period after the last reading
			select {
			case <-k.ch:
			case <-time.After(10 * time.Second):
				t.Fatal("no kill at the reading after the overrun")
			}
			took := k.at[0].Sub(start)
			t.Logf("overrun %v into the period: killed %v later on the sampler's clock (period %v); tick to kill took %v of wall time",
				tt.after, took, period, time.Since(wall))
			if took > period {
				t.Errorf("killed %v after the overrun, want at most one period (%v)", took, period)
			}
		})
	}
}

// waitFor polls cond for a few seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in time")
}
