// Package testing holds what the tests of package server and of the packages that use it
// share: a clock that moves only when told, the shipped leader election, an elector that runs
// for a test's length, and a poll with a deadline.
package testing

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// FakeClock is a fence's clock in tests: it moves only when told. client-go's own election
// runs on the real clock, with a retry period long enough (ShippedElection) that it does not
// renew while a test steps this one.
type FakeClock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

// NewFakeClock returns a clock at a fixed instant.
func NewFakeClock() *FakeClock {
	return &FakeClock{t: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}
}

// Now is the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Step moves the clock d forward.
func (c *FakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ShippedElection is the shipped timings (lease 8 s, margin 2 s) with a retry period of 4 s
// for identity: after acquiring the Lease, client-go writes it again only 4 s later (real
// time). The fence lag is 0: a FakeClock moves only when told.
func ShippedElection(identity string) server.ElectionConfig {
	cfg := server.DefaultElectionConfig()
	cfg.Identity, cfg.RetryPeriod, cfg.FenceLag = identity, 4*time.Second, 0
	return cfg
}

// RunElector runs el until the test ends.
func RunElector(ctx context.Context, t testing.TB, el *server.Elector) {
	t.Helper()
	ctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = el.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// WaitFor polls cond for up to 5 s, failing t if it is still false then, and returns how long
// it took.
func WaitFor(t testing.TB, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}
