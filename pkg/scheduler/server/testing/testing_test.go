package testing

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestFakeClock: the clock moves by what it is told, and only then.
func TestFakeClock(t *testing.T) {
	c := NewFakeClock()
	start := c.Now()
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() moved by itself: %v, then %v", start, got)
	}
	for _, step := range []time.Duration{time.Second, 10 * time.Minute} {
		before := c.Now()
		c.Step(step)
		if got := c.Now().Sub(before); got != step {
			t.Errorf("Step(%v) moved the clock %v", step, got)
		}
	}
}

// TestShippedElection: the shipped Lease timings, with the test's identity, a retry period
// of 4 s and no fence lag.
func TestShippedElection(t *testing.T) {
	cfg := ShippedElection("a")
	if cfg.Identity != "a" || cfg.RetryPeriod != 4*time.Second || cfg.FenceLag != 0 || cfg.LeaseDuration != 8*time.Second {
		t.Errorf("ShippedElection() = %+v", cfg)
	}
}

// TestWaitFor: WaitFor returns once cond holds.
func TestWaitFor(t *testing.T) {
	var calls atomic.Int32
	WaitFor(t, "the third call", func() bool { return calls.Add(1) >= 3 })
	if got := calls.Load(); got != 3 {
		t.Errorf("cond called %d times, want 3", got)
	}
}
