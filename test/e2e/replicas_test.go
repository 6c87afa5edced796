package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// replicaCluster is 100 nodes of 4 x 16 GiB cards (6,400 units).
func replicaCluster() map[string][]contract.GPU {
	cards := map[string][]contract.GPU{}
	for i := range 100 {
		n := fmt.Sprintf("gpu-%03d", i)
		cards[n] = framework.Cards(n, "Tesla T4", 16, 4)
	}
	return cards
}

// TestTwoReplicasLeaderKilledMidBurst runs two extender replicas behind a round-robin front, as
// a Deployment of 2 behind a Service: one leads and binds, the other answers filter and
// prioritize and refuses binds. The leader is SIGKILLed while a burst of 1,000 pods is being
// bound: the follower takes over once the Lease runs out, every pod is bound once, no card is
// over capacity, and the survivor's cache equals the API server's truth.
func TestTwoReplicasLeaderKilledMidBurst(t *testing.T) {
	const pods = 1000
	e := newEnvWithoutScheduler(t, "--leader-elect-identity=ext-a")
	leader, follower := e.ext, e.twoReplicas()
	cards := replicaCluster()
	e.nodes(cards)
	done := make(chan struct{})
	go func() { defer close(done); e.createBurst("rep", 0, pods) }()
	if err := e.pollFast(3*time.Minute, func() (bool, error) {
		n, _, err := e.countBound()
		return n >= pods/4, err
	}); err != nil {
		t.Fatalf("burst never got a quarter bound: %v", err)
	}
	leader.Proc.Kill()
	killed := time.Now()
	atKill, _, _ := e.countBound()
	if err := e.pollFast(time.Minute, func() (bool, error) { return follower.Leading(e.ctx) }); err != nil {
		t.Fatalf("the follower never took over: %v", err)
	}
	tookOver := time.Since(killed)
	if err := e.pollFast(time.Minute, func() (bool, error) {
		n, _, err := e.countBound()
		return n > atKill, err
	}); err != nil {
		t.Fatalf("no pod bound after the leader died: %v", err)
	}
	t.Logf("leader SIGKILLed with %d of %d pods bound; the follower led %.1f s later, bound again %.1f s after the kill",
		atKill, pods, tookOver.Seconds(), time.Since(killed).Seconds())
	if tookOver > 15*time.Second {
		t.Errorf("failover took %v, want at most 15 s", tookOver)
	}
	<-done
	e.ext = follower
	e.waitAllBound(pods, 6*time.Minute)
	e.checkConsistent(cards)
}

// twoReplicas starts a second extender replica (ext-b) beside e.ext (started with
// --leader-elect-identity=ext-a), a front that round-robins each request over both, and
// kube-scheduler (with e.c.SchedulerConfig) calling the front. It returns the second replica
// once e.ext leads and it does not.
func (e *env) twoReplicas() *framework.Extender {
	e.t.Helper()
	b, err := e.c.StartExtenderAs(e.ctx, "extender-b", s.extender, 0, "--leader-elect-identity=ext-b")
	if err != nil {
		e.t.Fatal(err)
	}
	front, err := e.c.StartRoundRobin(e.ext, b)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(front.Close)
	if err := e.c.StartScheduler(front.Host); err != nil {
		e.t.Fatal(err)
	}
	if err := poll(e.ctx, 30*time.Second, func() (bool, error) { return e.ext.Leading(e.ctx) }); err != nil {
		e.t.Fatalf("the first replica never led: %v", err)
	}
	if lead, err := b.Leading(e.ctx); err != nil || lead {
		e.t.Fatalf("the second replica leads too (%v, %v)", lead, err)
	}
	return b
}
