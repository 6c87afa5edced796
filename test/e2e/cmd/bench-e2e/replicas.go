package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// The extender's replicas of a run: started behind a front, handed over, counted.

// replicaStats is what one extender replica did in a run, by its /metrics.
type replicaStats struct {
	Name string `json:"name"`
	// Leading is whether it led at the end of the run.
	Leading bool `json:"leading"`
	// Binds and BindFailures are its gpushare_bind_total and gpushare_bind_failures_total,
	// Filters its gpushare_filter_total (calls it answered itself), Forwarded the calls it
	// forwarded to the leader (gpushare_forwarded_requests_total, outcome forwarded).
	Binds        int `json:"binds"`
	BindFailures int `json:"bind_failures"`
	Filters      int `json:"filters"`
	Forwarded    int `json:"forwarded"`
	// Connections is how many connections the connection front gave it (that front only).
	Connections *int `json:"connections,omitempty"`
}

// letters name the replicas, one each (maxReplicas).
const letters = "abcdefghijklmnopqrstuvwxyz"

// replicaName is the process name of extender replica i: "extender", then "extender-b",
// "extender-c"...; replicaIdentity is its name in the leader election's Lease.
func replicaName(i int) string {
	if i == 0 {
		return "extender"
	}
	return "extender-" + letters[i:i+1]
}

func replicaIdentity(i int) string { return "ext-" + letters[i:i+1] }

// startExtenders starts the extender's replicas and, with several or with --front, the front
// before them. It returns the host kube-scheduler calls, each replica's profiling address (with
// --cpu-profile) and what closes the front.
func (b *bench) startExtenders(ctx context.Context) (host string, profileAddrs []string, closeFront func(), err error) {
	closeFront = func() {}
	var asAccount []string
	if b.o.fence {
		flag, err := b.installFence(ctx)
		if err != nil {
			return "", nil, closeFront, fmt.Errorf("--fence: %w", err)
		}
		asAccount = []string{flag}
	}
	for i := range b.o.replicas {
		var election []string
		if b.o.replicas > 1 {
			election = []string{"--leader-elect=true", "--leader-elect-identity=" + replicaIdentity(i)}
		}
		election = append(election, asAccount...)
		if b.o.dra {
			election = append(election, draExtenderModeFlag)
		}
		args, profileAddr, err := benchrun.ExtenderArgs(b.o.ExtenderArgs, b.o.profile != "", election...)
		if err != nil {
			return "", nil, closeFront, err
		}
		if profileAddr != "" {
			profileAddrs = append(profileAddrs, profileAddr)
		}
		ext, err := b.c.StartExtenderAs(ctx, replicaName(i), b.mode.extender, 0, args...)
		if err != nil {
			return "", nil, closeFront, fmt.Errorf("%s: %w", replicaName(i), err)
		}
		b.exts, b.names, b.args = append(b.exts, ext), append(b.names, replicaName(i)), append(b.args, args)
	}
	b.ext = b.exts[0]
	if b.o.replicas > 1 {
		if err := b.waitLeader(ctx); err != nil {
			return "", nil, closeFront, err
		}
		if b.o.fence {
			if err := b.waitFence(ctx); err != nil {
				return "", nil, closeFront, fmt.Errorf("--fence: %w", err)
			}
		}
	}
	// The followers come first behind a front: kube-scheduler's first connection, and the first
	// call, land on a follower, the case that cost binds before followers forwarded.
	behind := b.followersFirst(ctx)
	b.frontOrder = behind
	switch b.o.frontUsed() {
	case frontNone:
		return b.ext.Host(), profileAddrs, closeFront, nil
	case frontConnection:
		f, err := b.c.StartConnFront(behind...)
		if err != nil {
			return "", nil, closeFront, err
		}
		b.conns = f.Conns
		return f.Host, profileAddrs, f.Close, nil
	default:
		start := b.c.StartRoundRobin
		if b.o.front == frontRequestLeader {
			start = b.c.StartLeaderRoundRobin
		}
		f, err := start(behind...)
		if err != nil {
			return "", nil, closeFront, err
		}
		return f.Host, profileAddrs, f.Close, nil
	}
}

// handOver stops the leading replica (it releases the Lease on SIGTERM), waits until another
// leads, and starts the stopped one again on its port, where the front still sends to it.
func (b *bench) handOver(ctx context.Context) error {
	for i, ext := range b.exts {
		if lead, err := ext.Leading(ctx); err != nil || !lead {
			continue
		}
		logf("handover: stopping %s, the leader", b.names[i])
		ext.Proc.Stop(20 * time.Second)
		start := time.Now()
		if err := b.waitLeader(ctx); err != nil {
			return err
		}
		logf("handover: a new leader after %.1f s; restarting %s as a follower", time.Since(start).Seconds(), b.names[i])
		again, err := b.c.StartExtenderAs(ctx, b.names[i], b.mode.extender, ext.Port, b.args[i]...)
		if err != nil {
			return fmt.Errorf("restart %s: %w", b.names[i], err)
		}
		b.exts[i] = again
		b.ext = b.exts[0]
		if j := slices.Index(b.frontOrder, ext); j >= 0 {
			b.frontOrder[j] = again
		}
		return nil
	}
	return errors.New("handover: no replica leads")
}

// waitLeader waits until one replica says it leads, and logs which.
func (b *bench) waitLeader(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return framework.WaitFor(ctx, 250*time.Millisecond, "an extender replica to lead", func() (bool, error) {
		for i, ext := range b.exts {
			if lead, err := ext.Leading(ctx); err == nil && lead {
				logf("%s (%s) leads", b.names[i], replicaIdentity(i))
				return true, nil
			}
		}
		return false, nil
	})
}

// followersFirst is the replicas with those that do not lead first.
func (b *bench) followersFirst(ctx context.Context) []*framework.Extender {
	var lead, follow []*framework.Extender
	for _, ext := range b.exts {
		if l, err := ext.Leading(ctx); err == nil && l {
			lead = append(lead, ext)
		} else {
			follow = append(follow, ext)
		}
	}
	return append(follow, lead...)
}

// replicaStats reads each replica's bind and filter counters (and whether it leads), and the
// connections the connection front gave it.
func (b *bench) replicaStats(ctx context.Context) ([]replicaStats, error) {
	var conns []int
	if b.conns != nil {
		conns = b.conns()
	}
	out := make([]replicaStats, 0, len(b.exts))
	for i, ext := range b.exts {
		m, err := ext.Metrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s metrics: %w", b.names[i], err)
		}
		lead, err := ext.Leading(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s /readyz: %w", b.names[i], err)
		}
		st := replicaStats{Name: b.names[i], Leading: lead, Binds: int(m["gpushare_bind_total"]),
			BindFailures: int(m["gpushare_bind_failures_total"]), Filters: int(m["gpushare_filter_total"])}
		for k, v := range m {
			if strings.HasPrefix(k, "gpushare_forwarded_requests_total{") && strings.Contains(k, `outcome="forwarded"`) {
				st.Forwarded += int(v)
			}
		}
		if j := slices.Index(b.frontOrder, ext); conns != nil && j >= 0 && j < len(conns) {
			st.Connections = &conns[j]
		}
		logf("%s: %d binds, %d bind failures, %d filters, leading %t", st.Name, st.Binds, st.BindFailures, st.Filters, st.Leading)
		out = append(out, st)
	}
	return out, nil
}
