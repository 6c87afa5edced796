package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// faultBurst is the size of the bursts the fault tests bind through a fault: 1,000 pods of
// 1-3 GiB on replicaCluster's 100 nodes.
const faultBurst = 1000

// sample is how many pods were bound at a moment.
type sample struct {
	at    time.Time
	bound int
}

// progress samples the number of bound pods every 250 ms until stopped. A sample whose List
// fails or takes over a second (the API server down) is not recorded.
type progress struct {
	mu      sync.Mutex
	samples []sample
	stop    context.CancelFunc
	done    chan struct{}
}

func (e *env) watchProgress() *progress {
	ctx, stop := context.WithCancel(e.ctx)
	p := &progress{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			at := time.Now() // the List reflects a moment after this
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			list, err := e.c.Client.CoreV1().Pods("default").List(lctx, metav1.ListOptions{})
			cancel()
			if err == nil {
				n := 0
				for _, pod := range list.Items {
					if pod.Spec.NodeName != "" {
						n++
					}
				}
				p.mu.Lock()
				p.samples = append(p.samples, sample{at, n})
				p.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return p
}

// Stop ends the sampling.
func (p *progress) Stop() {
	p.stop()
	<-p.done
}

// boundAt is the last sampled count at or before t (0 before any sample).
func (p *progress) boundAt(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.samples {
		if s.at.After(t) {
			break
		}
		n = s.bound
	}
	return n
}

// firstBindAfter is when the bound count first rose above what it was at t, or false.
func (p *progress) firstBindAfter(t time.Time) (time.Time, bool) {
	base := p.boundAt(t)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.samples {
		if s.at.After(t) && s.bound > base {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// fault is one injected failure: inject starts it and returns once it is over (the component
// serves again, or its replacement does).
type fault struct {
	name   string
	inject func(t *testing.T, e *env)
}

// burstThroughFault creates faultBurst pods on replicaCluster, injects f once a quarter of them is
// bound, then waits for every pod to be bound and checks the invariants. It logs the timeline:
// what was bound when the fault began and ended, when binding resumed, and when it finished,
// and the extender's bind counters.
func (e *env) burstThroughFault(prefix string, f fault) {
	e.t.Helper()
	cards := replicaCluster()
	e.nodes(cards)
	prog := e.watchProgress()
	defer prog.Stop()
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); e.createBurst(prefix, 0, faultBurst) }()
	var atBegin int
	if err := e.pollFast(3*time.Minute, func() (bool, error) {
		n, _, err := e.countBound()
		atBegin = n
		return n >= faultBurst/4, err
	}); err != nil {
		e.t.Fatalf("burst never got a quarter bound: %v", err)
	}
	began := time.Now()
	f.inject(e.t, e)
	over := time.Now()
	atOver, _, err := e.countBound()
	if err != nil {
		e.t.Fatalf("count bound pods after the fault: %v", err)
	}
	<-done
	e.waitAllBound(faultBurst, 6*time.Minute)
	finished := time.Now()
	resumed, ok := prog.firstBindAfter(over)
	resumedIn := "never (all were bound already)"
	if ok {
		resumedIn = fmt.Sprintf("%.1f s", resumed.Sub(over).Seconds())
	}
	e.t.Logf("%s: began %.1f s into the burst with %d of %d pods bound, lasted %.1f s (%d bound meanwhile); "+
		"binding resumed %s after it ended; all bound %.1f s after it ended (burst %.1f s in all)",
		f.name, began.Sub(start).Seconds(), atBegin, faultBurst, over.Sub(began).Seconds(),
		atOver-atBegin, resumedIn, finished.Sub(over).Seconds(), finished.Sub(start).Seconds())
	e.logBindCounters()
	e.checkConsistent(cards)
}

// logBindCounters logs the extender's bind counters (/metrics).
func (e *env) logBindCounters() {
	e.t.Helper()
	m, err := e.ext.Metrics(e.ctx)
	if err != nil {
		e.t.Fatalf("extender metrics: %v", err)
	}
	var parts []string
	for _, name := range []string{"gpushare_bind_total", "gpushare_bind_failures_total", "gpushare_bind_unknown_outcome_total",
		"gpushare_bind_settled_bound_total", "gpushare_bind_settled_released_total", "gpushare_overcommitted_cards"} {
		parts = append(parts, fmt.Sprintf("%s=%g", strings.TrimPrefix(name, "gpushare_"), m[name]))
	}
	e.t.Logf("extender counters: %s", strings.Join(parts, " "))
}

// TestAPIServerPausedMidBurst stops kube-apiserver (SIGSTOP) for 30 s while a burst is being
// bound: Binding calls hang and time out with an unknown outcome. The extender keeps those
// charges until it has settled them, so no card is over capacity afterwards, and every pod is
// bound once the API server answers again.
func TestAPIServerPausedMidBurst(t *testing.T) {
	e := newEnv(t)
	e.burstThroughFault("paused", fault{name: "kube-apiserver SIGSTOPped 30 s", inject: func(t *testing.T, e *env) {
		api := e.c.Proc("kube-apiserver")
		if err := api.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		if err := api.Resume(); err != nil {
			t.Fatal(err)
		}
	}})
}

// TestAPIServerRestartedMidBurst kills kube-apiserver (SIGKILL) while a burst is being bound
// and starts it again on the same etcd after 5 s: calls in flight fail with broken connections,
// new ones are refused, and the informers re-list. Afterwards every pod is bound once and the
// cache equals the API server's truth.
func TestAPIServerRestartedMidBurst(t *testing.T) {
	e := newEnv(t)
	e.burstThroughFault("restarted", fault{name: "kube-apiserver SIGKILLed, restarted after 5 s", inject: func(t *testing.T, e *env) {
		if err := e.c.RestartAPIServer(e.ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}})
}

// TestExtenderKilledMidBurst kills the extender (SIGKILL) while a burst is being bound and
// starts a new one on the same port 2 s later; the new one rebuilds its cache from the API
// server: every pod is bound once, no card is over capacity, and the cache equals the truth.
func TestExtenderKilledMidBurst(t *testing.T) {
	e := newEnv(t)
	e.burstThroughFault("killed", fault{name: "extender SIGKILLed, new one 2 s later", inject: func(t *testing.T, e *env) {
		e.ext.Proc.Kill()
		time.Sleep(2 * time.Second) // the scheduler's calls fail meanwhile; pods go back to the queue
		ext, err := e.c.StartExtender(e.ctx, s.extender, e.ext.Port, e.extArgs...)
		if err != nil {
			t.Fatal(err)
		}
		e.ext = ext
	}})
}

// TestSchedulerLeaderFailover runs two kube-scheduler replicas with leader election, as a
// highly available control plane does, and SIGKILLs the leader mid-burst: the other takes over
// when the Lease runs out (kube-scheduler's default 15 s), and schedules the rest through the same
// extender. A bind the dead leader had in flight either landed or is settled by the extender.
func TestSchedulerLeaderFailover(t *testing.T) {
	e := newEnvWithoutScheduler(t)
	first, err := e.c.StartSchedulerAs("kube-scheduler", e.ext.Host(), true)
	if err != nil {
		t.Fatal(err)
	}
	leaseHolder := func() (string, error) {
		l, err := e.c.Client.CoordinationV1().Leases("kube-system").Get(e.ctx, "kube-scheduler", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", err
		}
		return *l.Spec.HolderIdentity, nil
	}
	var leader string
	if err := poll(e.ctx, time.Minute, func() (bool, error) {
		h, err := leaseHolder()
		leader = h
		return h != "", err
	}); err != nil {
		t.Fatalf("the first kube-scheduler never led: %v", err)
	}
	if _, err := e.c.StartSchedulerAs("kube-scheduler-b", e.ext.Host(), true); err != nil {
		t.Fatal(err)
	}
	e.burstThroughFault("sched", fault{name: "kube-scheduler leader SIGKILLed", inject: func(t *testing.T, e *env) {
		first.Kill()
		killed := time.Now()
		if err := e.pollFast(time.Minute, func() (bool, error) {
			h, err := leaseHolder()
			return h != "" && h != leader, err
		}); err != nil {
			t.Fatalf("the second kube-scheduler never took over: %v", err)
		}
		t.Logf("the second kube-scheduler holds the Lease %.1f s after the leader was killed", time.Since(killed).Seconds())
	}})
}
