package gctarget

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercentFor(t *testing.T) {
	tests := []struct {
		name     string
		percent  int
		headroom uint64
		live     uint64
		want     int
	}{
		{name: "no floor", percent: 50, live: 10 * mib, want: 50},
		{name: "small heap: the floor wins", percent: 50, headroom: 32 * mib, live: 16 * mib, want: 200},
		{name: "rounds up", percent: 50, headroom: 32 * mib, live: 30 * mib, want: 107},
		{name: "large heap: the percentage wins", percent: 50, headroom: 32 * mib, live: 100 * mib, want: 50},
		{name: "at the edge", percent: 50, headroom: 32 * mib, live: 64 * mib, want: 50},
		{name: "nearly empty heap: bounded", percent: 50, headroom: 32 * mib, live: 1024, want: maxPercent},
		{name: "live heap unknown", percent: 50, headroom: 32 * mib, live: 0, want: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PercentFor(tt.percent, tt.headroom, tt.live); got != tt.want {
				t.Errorf("PercentFor(%d, %d, %d) = %d, want %d", tt.percent, tt.headroom, tt.live, got, tt.want)
			}
		})
	}
}

// TestTargetFollowsCollections: after a collection the percentage follows the live heap the
// runtime reports, small moves are ignored, and nothing changes once stopped.
func TestTargetFollowsCollections(t *testing.T) {
	var mu sync.Mutex
	var set []int
	live := uint64(16 * mib)
	tg := &Target{Percent: 50, MinHeadroom: 32 * mib,
		setPercent: func(p int) int { mu.Lock(); set = append(set, p); mu.Unlock(); return 100 },
		liveHeap:   func() uint64 { mu.Lock(); defer mu.Unlock(); return live },
	}
	calls := func() []int { mu.Lock(); defer mu.Unlock(); return append([]int(nil), set...) }
	waitFor := func(want []int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := calls()
			if len(got) == len(want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("percentages set %v, want %v", got, want)
					}
				}
				return
			}
			if len(got) > len(want) || time.Now().After(deadline) {
				t.Fatalf("percentages set %v, want %v", got, want)
			}
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	// collectAt sets the live heap the runtime reports, runs a few collections and checks that
	// the percentage was set n times in all.
	collectAt := func(bytes uint64, n int, why string) {
		t.Helper()
		mu.Lock()
		live = bytes
		mu.Unlock()
		for range 3 {
			runtime.GC()
			time.Sleep(5 * time.Millisecond)
		}
		if got := calls(); len(got) != n {
			t.Fatalf("%s: percentages set %v", why, got)
		}
	}
	tg.Start()
	waitFor([]int{50, 200})                                                 // Start, then the first collection's live heap
	collectAt(31*mib/2, 2, "207 % is within 1/16 of 200, not worth a call") // no new call
	mu.Lock()
	live = 200 * mib
	mu.Unlock()
	waitFor([]int{50, 200, 50})
	tg.Stop()
	collectAt(1*mib, 3, "stopped, but the percentage changed")
}
