package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// frontBurst is the burst of TestReplicasBurstThroughFronts: 1,000 pods of 1-3 units on
// replicaCluster's 6,400 units.
const frontBurst = 1000

// TestReplicasBurstThroughFronts is issue 31's "no user-visible cost of HA": the same burst of
// 1,000 pods through one extender replica, and through two (the shipped Deployment's count)
// behind a front that balances each request (round robin), one that does so but checks
// /readyz/leader, and one that balances each connection (a Service: kube-scheduler keeps its
// connections, so every call may land on the follower). Every pod is bound, no bind is refused
// because a replica does not lead (the follower forwards every verb to the leader:
// forward.go), and the follower did forward, except behind the leader-checking front, where it
// receives no call at all; behind the per-connection front kube-scheduler ends up connected to
// the leader too (the follower sheds its connection after a second of forwarding: conn_shed.go);
// no card is over capacity and the leader's cache equals the API's truth. The times are
// reported against the one replica's (make bench-e2e --replicas 2 measures them: speed goals
// live in benchmarks).
func TestReplicasBurstThroughFronts(t *testing.T) {
	times := map[string]time.Duration{}
	for _, front := range []string{"one replica", "per-request front", "leader-checking front", "per-connection front"} {
		t.Run(strings.ReplaceAll(front, " ", "-"), func(t *testing.T) { times[front] = burstThroughFront(t, front) })
	}
	t.Logf("1,000 pods bound in: one replica %.1f s; two replicas behind a per-request front %.1f s, behind one checking /readyz/leader %.1f s, behind a per-connection front %.1f s",
		times["one replica"].Seconds(), times["per-request front"].Seconds(), times["leader-checking front"].Seconds(), times["per-connection front"].Seconds())
}

func burstThroughFront(t *testing.T, front string) time.Duration {
	e := newEnvWithoutScheduler(t, "--leader-elect-identity=ext-a")
	leader := e.ext
	var follower *framework.Extender
	host := leader.Host()
	var conns func() []int
	if front != "one replica" {
		var err error
		if err = poll(e.ctx, 30*time.Second, func() (bool, error) { return leader.Leading(e.ctx) }); err != nil {
			t.Fatalf("the first replica never led: %v", err)
		}
		follower, err = e.c.StartExtenderAs(e.ctx, "extender-b", s.extender, 0, "--leader-elect-identity=ext-b")
		if err != nil {
			t.Fatal(err)
		}
		switch front {
		case "per-request front", "leader-checking front":
			start := e.c.StartRoundRobin
			if front == "leader-checking front" {
				start = e.c.StartLeaderRoundRobin
			}
			rr, err := start(follower, leader)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rr.Close)
			host = rr.Host
		default:
			cf, err := e.c.StartConnFront(follower, leader) // the first connection lands on the follower
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cf.Close)
			host, conns = cf.Host, cf.Conns
		}
	}
	if err := e.c.StartScheduler(host); err != nil {
		t.Fatal(err)
	}
	cards := replicaCluster()
	e.nodes(cards)
	start := time.Now()
	e.createBurst("front", 0, frontBurst)
	e.waitAllBound(frontBurst, 6*time.Minute)
	took := time.Since(start)

	replicas := []*framework.Extender{leader}
	if follower != nil {
		replicas = append(replicas, follower)
	}
	var refused int
	for i, r := range replicas {
		m, err := r.Metrics(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		log, err := os.ReadFile(r.Proc.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		atEntry, fenced := notLeaderRefusals(string(log))
		refused += atEntry + fenced
		t.Logf("replica %d: %g binds, %g bind failures, %d refused as not the leader; forwarded: %g filters, %g binds (%g failed attempts, %g answered locally)",
			i, m["gpushare_bind_total"], m["gpushare_bind_failures_total"], atEntry+fenced,
			m[forwarded("filter", "forwarded")], m[forwarded("bind", "forwarded")],
			m[forwarded("filter", "failed")]+m[forwarded("bind", "failed")],
			m[forwarded("filter", "answered_locally")]+m[forwarded("bind", "answered_locally")])
		if r == follower {
			if m["gpushare_bind_total"] != 0 {
				t.Errorf("the follower bound %g pods itself", m["gpushare_bind_total"])
			}
			sent := m[forwarded("filter", "forwarded")] + m[forwarded("bind", "forwarded")] + m[forwarded("prioritize", "forwarded")]
			switch {
			case front == "leader-checking front" && sent != 0:
				t.Errorf("the follower forwarded %g calls behind a front that checks /readyz/leader, want none", sent)
			case front != "leader-checking front" && sent == 0:
				t.Errorf("the follower forwarded nothing: the front never sent it a verb (%s)", front)
			}
		}
	}
	if conns != nil {
		c := conns()
		t.Logf("connections per replica (follower, leader): %v", c)
		if len(c) == 2 && c[1] == 0 {
			t.Errorf("kube-scheduler never connected to the leader (connections %v): the follower did not shed its connection", c)
		}
	}
	t.Logf("%s: %d pods bound %.1f s after the burst began; %d binds refused as not the leader", front, frontBurst, took.Seconds(), refused)
	if refused != 0 {
		t.Errorf("%d binds refused because a replica does not lead, want none", refused)
	}
	e.checkConsistent(cards)
	return took
}

// forwarded is the metric key of a follower's verbs by outcome.
func forwarded(verb, outcome string) string {
	return `gpushare_forwarded_requests_total{outcome="` + outcome + `",verb="` + verb + `"}`
}
