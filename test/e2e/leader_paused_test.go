package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// pausedCluster is 16 nodes of 8 x 16 GiB cards (128 cards, 2,048 units).
func pausedCluster() map[string][]contract.GPU {
	cards := map[string][]contract.GPU{}
	for i := range 16 {
		n := fmt.Sprintf("gpu-%02d", i)
		cards[n] = framework.Cards(n, "Tesla T4", 16, 8)
	}
	return cards
}

// The burst of the paused-leader tests: a first wave before the pause, a second one created
// as the old leader resumes, so that kube-scheduler has binds to send it. Requests are
// burstUnits (1-3 units): 1,200 units in all on pausedCluster's 2,048; a card refuses a pod
// only with at most 2 units free, so at most 256 units can be stranded and every pod fits.
// Packed, they fill some 75 cards to the brim: a replica placing pods on a stale cache puts
// them on full cards.
const (
	pausedFirstWave  = 400
	pausedSecondWave = 200
	// pausedAt is how many pods are bound when the leader is stopped.
	pausedAt = 80
)

// TestLeaderPausedMidBurst is issue 31's paused leader: two extender replicas behind a front
// that round-robins each request over the ready ones, the shipped election timings (lease 8 s,
// renew deadline 5 s, retry 1 s). The leader is stopped (SIGSTOP) mid-burst; the follower takes
// the Lease and binds; the old leader is resumed (SIGCONT) after 15 s or 30 s, with Binding
// calls of kube-scheduler queued on it and more pods arriving. Before the fence it went on
// binding on its stale cache for up to the renew deadline (45 and 55 cards over capacity in the
// probe). Now it must stop at once: gpushare_leader 0 as soon as it runs again, every bind it
// is sent forwarded to the new leader or refused at the fence, and it binds nothing after it resumed; every pod is bound
// once and no card is over capacity, by the API's annotations and by both replicas' audits,
// and the resumed replica does not take the Lease back (client-go's release after its failed
// renewal once cleared the new leader's Lease: both led for 5 s, 13 cards over capacity).
// The follower forwards every verb to the leader, so the replica the front picks makes no
// difference: it never refuses a bind for not leading. kube-scheduler runs with a 5 s extender
// httpTimeout (pausedHTTPTimeout says why).
func TestLeaderPausedMidBurst(t *testing.T) {
	for _, pause := range []time.Duration{15 * time.Second, 30 * time.Second} {
		t.Run(fmt.Sprintf("%.0fs", pause.Seconds()), func(t *testing.T) { leaderPausedMidBurst(t, pause) })
	}
}

func leaderPausedMidBurst(t *testing.T, pause time.Duration) {
	const pods = pausedFirstWave + pausedSecondWave
	e := newEnvWithoutScheduler(t, "--leader-elect-identity=ext-a")
	e.c.SchedulerConfig = shortExtenderTimeout(t, e.c.Dir)
	leader, follower := e.ext, e.twoReplicas()
	cards := pausedCluster()
	e.nodes(cards)
	prog := e.watchProgress()
	defer prog.Stop()

	start := time.Now()
	wave1 := make(chan struct{})
	go func() { defer close(wave1); e.createBurst("paused", 0, pausedFirstWave) }()
	if err := e.pollFast(3*time.Minute, func() (bool, error) {
		n, _, err := e.countBound()
		return n >= pausedAt, err
	}); err != nil {
		t.Fatalf("burst never got %d pods bound: %v", pausedAt, err)
	}
	if err := leader.Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	resumeOnce := func() { _ = leader.Proc.Resume() }
	t.Cleanup(resumeOnce) // a paused process would not stop on SIGTERM

	atPause, _, _ := e.countBound()
	if err := e.pollFast(pause+30*time.Second, func() (bool, error) { return follower.Leading(e.ctx) }); err != nil {
		t.Fatalf("the follower never took over: %v", err)
	}
	tookOver := time.Since(paused)
	// The follower must bind while the old leader is stopped: that is what the old leader's cache
	// misses when it resumes.
	followerBinds := func() float64 {
		m, err := follower.Metrics(e.ctx)
		if err != nil {
			t.Fatalf("follower metrics: %v", err)
		}
		return m["gpushare_bind_total"]
	}
	if err := poll(e.ctx, time.Until(paused.Add(pause)), func() (bool, error) { return followerBinds() > 0, nil }); err != nil {
		t.Fatalf("the follower, leading %.1f s after the pause, bound nothing during the %v pause", tookOver.Seconds(), pause)
	}
	firstFollowerBind := time.Since(paused)
	time.Sleep(time.Until(paused.Add(pause)))
	duringPause := followerBinds()
	atResume, _, _ := e.countBound()
	logOffset := fileSize(t, leader.Proc.LogPath) // the stopped replica writes nothing
	if err := leader.Proc.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()

	// The fence: a replica resumed after a pause longer than the Lease leads no more by its own
	// clock, before client-go has even tried to renew.
	m, err := leader.Metrics(e.ctx)
	if err != nil {
		t.Fatalf("resumed replica's metrics: %v", err)
	}
	leaderGauge := m["gpushare_leader"]
	gaugeAfter := time.Since(resumed)
	if leaderGauge != 0 {
		t.Errorf("resumed replica says gpushare_leader %g %.0f ms after SIGCONT, want 0", leaderGauge, gaugeAfter.Seconds()*1000)
	}
	if lead, err := leader.Leading(e.ctx); err != nil || lead {
		t.Errorf("resumed replica's /readyz says leading=%v (%v), want false", lead, err)
	}
	// Binds whose Binding the API server took before the pause end as the replica runs again;
	// after that, a replica that does not lead counts none.
	time.Sleep(2 * time.Second)
	m, err = leader.Metrics(e.ctx)
	if err != nil {
		t.Fatalf("resumed replica's metrics: %v", err)
	}
	oldBindsAfterResume := m["gpushare_bind_total"]

	wave2 := make(chan struct{})
	go func() { defer close(wave2); e.createBurst("resumed", pausedFirstWave, pods) }()
	<-wave1
	<-wave2
	e.waitAllBound(pods, 6*time.Minute)
	finished := time.Now()

	// Who bound what, and who refused.
	mOld, err := leader.Metrics(e.ctx)
	if err != nil {
		t.Fatalf("resumed replica's metrics: %v", err)
	}
	mNew, err := follower.Metrics(e.ctx)
	if err != nil {
		t.Fatalf("new leader's metrics: %v", err)
	}
	after := logSince(t, leader.Proc.LogPath, logOffset)
	refusedAtEntry, fencedAtWrite := notLeaderRefusals(after)
	placedAfterResume := strings.Count(after, `"Placed pod"`)
	releadAfterResume := strings.Contains(after, "Leading: this replica binds")
	oldAll, _ := os.ReadFile(leader.Proc.LogPath)
	newAll, _ := os.ReadFile(follower.Proc.LogPath)
	oldEntry, oldFenced := notLeaderRefusals(string(oldAll))
	newEntry, newFenced := notLeaderRefusals(string(newAll))
	t.Logf("pause %v: leader stopped %.1f s into the burst with %d of %d pods bound; the follower led %.1f s later and bound "+
		"%.1f s after the stop; %g binds by the new leader during the pause; %d pods bound at SIGCONT; "+
		"gpushare_leader %g on the resumed replica %.0f ms after SIGCONT",
		pause, paused.Sub(start).Seconds(), atPause, pods, tookOver.Seconds(), firstFollowerBind.Seconds(),
		duringPause, atResume, leaderGauge, gaugeAfter.Seconds()*1000)
	t.Logf("binds: old leader %g (%g by 2 s after SIGCONT), new leader %g; bind failures: old %g, new %g; "+
		"rollbacks: old %g, new %g; refused as not leader: old %d at entry + %d fenced at the write (after SIGCONT: %d + %d, and %d placements), "+
		"new %d + %d; binds forwarded: by the resumed replica %g, by the follower %g; all %d pods bound %.1f s after the burst began, %.1f s after SIGCONT",
		mOld["gpushare_bind_total"], oldBindsAfterResume, mNew["gpushare_bind_total"],
		mOld["gpushare_bind_failures_total"], mNew["gpushare_bind_failures_total"],
		mOld["gpushare_bind_rollbacks_total"], mNew["gpushare_bind_rollbacks_total"],
		oldEntry, oldFenced, refusedAtEntry, fencedAtWrite, placedAfterResume, newEntry, newFenced,
		mOld[forwarded("bind", "forwarded")], mNew[forwarded("bind", "forwarded")], pods, finished.Sub(start).Seconds(), finished.Sub(resumed).Seconds())
	if resumeLines := firstLines(after, "Bind", 8); resumeLines != "" {
		t.Logf("resumed replica's first bind lines after SIGCONT:\n%s", resumeLines)
	}

	// The resumed replica was sent binds (those queued on it during the pause, and half of the
	// second wave's): it forwarded them to the new leader or, for binds it had begun before
	// the pause, refused them at the fence; it bound nothing once it ran again. It led until
	// the pause, so every bind it forwarded was forwarded after SIGCONT.
	forwardedAfterResume := mOld[forwarded("bind", "forwarded")]
	if refusedAtEntry+fencedAtWrite == 0 && forwardedAfterResume == 0 {
		t.Errorf("resumed replica neither forwarded nor refused a bind after SIGCONT; its log since:\n%s", firstLines(after, "", 40))
	}
	// The follower never refused a bind for not leading: it forwarded them to the leader, and
	// while none could be reached it held them until it led itself (pkg/scheduler/server/forward.go).
	if newEntry+newFenced != 0 {
		t.Errorf("the follower refused %d binds as not the leader, want none: %s", newEntry+newFenced, firstLines(string(newAll), "not the leader", 3))
	}
	if releadAfterResume { // client-go's release after the failed renewal once cleared the new leader's Lease
		t.Errorf("resumed replica took the Lease back from the new leader: %s", firstLines(after, "Leading: this replica binds", 1))
	}
	if mOld["gpushare_bind_total"] != oldBindsAfterResume {
		t.Errorf("resumed replica, not leading, bound %g pods after SIGCONT", mOld["gpushare_bind_total"]-oldBindsAfterResume)
	}

	// No card over capacity by the API's annotations, and neither replica's cache sees one.
	inv, err := e.c.CheckInvariants(e.ctx, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.OK() {
		t.Fatalf("API server: %v", inv)
	}
	e.ext = follower
	e.checkConsistent(cards)
	var last framework.Invariants
	if err := poll(e.ctx, 45*time.Second, func() (bool, error) {
		last, err = e.c.CheckInvariants(e.ctx, "default", leader)
		return err == nil && last.OK(), err
	}); err != nil {
		t.Fatalf("resumed replica's audit: %v (%v)", last, err)
	}
}

// pausedHTTPTimeout is kube-scheduler's extender httpTimeout in the paused-leader tests. With
// the shipped 30 s, the filter call the front sends the leader as it stops hangs, and with it
// kube-scheduler's scheduling loop, which calls filter in line: nothing is scheduled, so the
// follower binds nothing, until the stopped replica resumes or 30 s have passed (the first run
// of this test: "Computing predicates done" after 14,994 ms of a 15 s pause). The fence is
// about what the resumed replica does to a cluster the new leader has moved on in; a shorter
// timeout lets kube-scheduler give up on the stopped replica and the new leader bind.
const pausedHTTPTimeout = "5s"

// shortExtenderTimeout writes into dir the shipped scheduler configuration with the extenders'
// httpTimeout set to pausedHTTPTimeout and returns its path.
func shortExtenderTimeout(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(framework.SchedulerConfigPath(s.root))
	if err != nil {
		t.Fatal(err)
	}
	const shipped = "httpTimeout: 30s"
	if !strings.Contains(string(raw), shipped) {
		t.Fatalf("the shipped scheduler configuration has no %q", shipped)
	}
	path := filepath.Join(dir, "scheduler-config-paused.yaml")
	short := strings.ReplaceAll(string(raw), shipped, "httpTimeout: "+pausedHTTPTimeout)
	if err := os.WriteFile(path, []byte(short), 0o644); err != nil { //nolint:gosec // G703: the test's artifact folder
		t.Fatal(err)
	}
	return path
}

// fileSize is the size of the file at path.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// logSince is the file at path from offset on.
func logSince(t *testing.T, path string, offset int64) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(raw)) {
		return ""
	}
	return string(raw[offset:])
}

// notLeaderRefusals counts the binds an extender log shows refused because the replica does not
// lead: atEntry before anything was decided, fenced after the placement, at the Binding write.
func notLeaderRefusals(log string) (atEntry, fenced int) {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"Bind failed"`) || !strings.Contains(line, "not the leader") {
			continue
		}
		if strings.Contains(line, "nothing sent") {
			fenced++
		} else {
			atEntry++
		}
	}
	return atEntry, fenced
}

// firstLines is the first n lines of log containing sub.
func firstLines(log, sub string, n int) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if len(out) == n {
			break
		}
		if line != "" && strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
