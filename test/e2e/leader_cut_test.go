package e2e

import (
	"net/url"
	"testing"
	"time"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// cutFor is how long the leader's API connections carry nothing in TestLeaderAPIConnectionCut:
// longer than the Lease (8 s), so that the follower takes over while the old leader runs on.
const cutFor = 20 * time.Second

// TestLeaderAPIConnectionCut is issue 31's partition: two extender replicas behind a
// per-request front, the leader reaching kube-apiserver through a proxy that, mid-burst,
// stops carrying bytes on every connection (open ones fall silent, new ones hang) while the
// leader process keeps running and answering kube-scheduler. The leader cannot renew its
// Lease: by its own clock it stops binding (its fence), the follower takes the Lease and binds,
// and the leader's Bindings in flight at the cut never reach the API server. After cutFor the
// partition heals (the silent connections are closed, as TCP timeouts would), a second wave
// arrives, and the old leader, now a follower, forwards. Every pod is bound once, no card is
// over capacity by the API's annotations and by both replicas' audits, and the new leader's
// cache equals the API's truth. kube-scheduler keeps the shipped 30 s httpTimeout: a
// partitioned replica answers filter at once (from its cache) and holds a bind until a leader
// is reached or BindWait ends.
func TestLeaderAPIConnectionCut(t *testing.T) {
	const pods = pausedFirstWave + pausedSecondWave
	e := newEnvWithoutScheduler(t, "--leader-elect-identity=ext-start")
	e.ext.Proc.Stop(10 * time.Second) // releases the Lease: the replica behind the proxy leads
	api, err := url.Parse(e.c.Server())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := framework.StartPausableProxy(api.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	via, err := e.c.KubeconfigVia(proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	leader, err := e.c.StartExtenderAs(e.ctx, "extender-a", s.extender, 0, "--kubeconfig="+via, "--leader-elect-identity=ext-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := poll(e.ctx, 30*time.Second, func() (bool, error) { return leader.Leading(e.ctx) }); err != nil {
		t.Fatalf("the replica behind the proxy never led: %v", err)
	}
	follower, err := e.c.StartExtenderAs(e.ctx, "extender-b", s.extender, 0, "--leader-elect-identity=ext-b")
	if err != nil {
		t.Fatal(err)
	}
	front, err := e.c.StartRoundRobin(leader, follower)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	if err := e.c.StartScheduler(front.Host); err != nil {
		t.Fatal(err)
	}
	cards := pausedCluster()
	e.nodes(cards)

	start := time.Now()
	wave1 := make(chan struct{})
	go func() { defer close(wave1); e.createBurst("cut", 0, pausedFirstWave) }()
	if err := e.pollFast(3*time.Minute, func() (bool, error) {
		n, _, err := e.countBound()
		return n >= pausedAt, err
	}); err != nil {
		t.Fatalf("burst never got %d pods bound: %v", pausedAt, err)
	}
	proxy.Cut()
	cut := time.Now()
	atCut, _, _ := e.countBound()
	if err := e.pollFast(20*time.Second, func() (bool, error) {
		lead, err := leader.Leading(e.ctx)
		return err == nil && !lead, err
	}); err != nil {
		t.Fatalf("the cut-off leader still says it leads: %v", err)
	}
	stoppedLeading := time.Since(cut)
	if err := e.pollFast(cutFor, func() (bool, error) { return follower.Leading(e.ctx) }); err != nil {
		t.Fatalf("the follower never took over: %v", err)
	}
	tookOver := time.Since(cut)
	time.Sleep(time.Until(cut.Add(cutFor)))
	atRestore, _, _ := e.countBound()
	mOld, err := leader.Metrics(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	restored := time.Now()

	wave2 := make(chan struct{})
	go func() { defer close(wave2); e.createBurst("healed", pausedFirstWave, pods) }()
	<-wave1
	<-wave2
	e.waitAllBound(pods, 6*time.Minute)
	finished := time.Now()
	mOldEnd, err := leader.Metrics(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	mNew, err := follower.Metrics(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("API cut %.1f s into the burst with %d of %d pods bound; the leader stopped leading %.1f s after the cut, the follower led %.1f s after it; "+
		"%d pods bound when the cut healed (%v); binds: old leader %g (%g at the heal), new leader %g; unknown outcomes: old %g; "+
		"forwarded binds: old %g, new %g; all bound %.1f s after the burst began, %.1f s after the heal",
		cut.Sub(start).Seconds(), atCut, pods, stoppedLeading.Seconds(), tookOver.Seconds(), atRestore, cutFor,
		mOldEnd["gpushare_bind_total"], mOld["gpushare_bind_total"], mNew["gpushare_bind_total"], mOldEnd["gpushare_bind_unknown_outcome_total"],
		mOldEnd[forwarded("bind", "forwarded")], mNew[forwarded("bind", "forwarded")],
		finished.Sub(start).Seconds(), finished.Sub(restored).Seconds())
	if mNew["gpushare_bind_total"] == 0 {
		t.Error("the new leader bound nothing: the test did not exercise a takeover during the cut")
	}
	if mOldEnd["gpushare_bind_total"] != mOld["gpushare_bind_total"] {
		t.Errorf("the old leader, not leading, bound %g pods after the heal", mOldEnd["gpushare_bind_total"]-mOld["gpushare_bind_total"])
	}

	inv, err := e.c.CheckInvariants(e.ctx, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.OK() {
		t.Fatalf("API server: %v", inv)
	}
	var last framework.Invariants
	if err := poll(e.ctx, 45*time.Second, func() (bool, error) {
		last, err = e.c.CheckInvariants(e.ctx, "default", leader)
		return err == nil && last.OK(), err
	}); err != nil {
		t.Fatalf("old leader's audit after the heal: %v (%v)", last, err)
	}
	e.ext = follower
	e.checkConsistent(cards)
}
