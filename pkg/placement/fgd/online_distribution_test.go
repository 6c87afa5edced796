package fgd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

func TestOnlineDistribution(t *testing.T) {
	a := TaskShape{MilliCPU: 1000, GPUs: 1, PerGPU: 500}
	b := TaskShape{MilliCPU: 2000, GPUs: 1, PerGPU: 1000}
	tests := []struct {
		name     string
		halfLife float64
		seen     []TaskShape
		want     []TaskType
	}{
		{"counts without decay", 1e12, []TaskShape{a, a, a, b},
			[]TaskType{{TaskShape: a, Weight: 0.75}, {TaskShape: b, Weight: 0.25}}},
		// with a half-life of one pod, each observation weighs twice the one before: 2:4:8:16.
		{"decay favours recent pods", 1, []TaskShape{a, a, a, b},
			[]TaskType{{TaskShape: b, Weight: 16.0 / 30}, {TaskShape: a, Weight: 14.0 / 30}}},
		{"nothing seen", 100, nil, []TaskType{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOnlineDistribution(tt.halfLife)
			for _, s := range tt.seen {
				o.observe(s)
			}
			got := o.current.Load().Types()
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9), cmpopts.IgnoreUnexported(TaskType{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Types (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestOnlineDistributionPublishes: readers get a new typical set at the 1st, 2nd, 4th ... 64th
// observation, then after a quarter more observations than were seen at the last one (at
// least learnRefresh, at most learnHalfLife/4); each one makes every node's fragmentation be
// computed again, so a burst of first pods does not pay it per pod, nor a busy cluster every
// 64 binds.
func TestOnlineDistributionPublishes(t *testing.T) {
	o := newOnlineDistribution(learnHalfLife)
	var got []int
	last := o.current.Load()
	for n := 1; n <= 9000; n++ {
		o.observe(TaskShape{MilliCPU: 1000, GPUs: 1, PerGPU: int64(100 + n%7)})
		if cur := o.current.Load(); cur != last {
			got, last = append(got, n), cur
		}
	}
	want := []int{1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 320, 400, 500, 625, 781, 976, 1220, 1525,
		1906, 2382, 2977, 3721, 4651, 5813, 7063, 8313}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("published after these observations (-want,+got):\n%s", diff)
	}
}

func TestOnlineDistributionIsBounded(t *testing.T) {
	o := newOnlineDistribution(learnHalfLife)
	for i := range learnMaxShapes + 100 {
		o.observe(TaskShape{MilliCPU: int64(100 + i), GPUs: 1, PerGPU: 100})
	}
	if got := len(o.counts); got != learnMaxShapes {
		t.Errorf("remembered %d shapes, want at most %d", got, learnMaxShapes)
	}
}

func TestFGDOnlineRebuild(t *testing.T) {
	node := fragNode(10000, 1000, 300)
	node.Pods = []placement.PodInfo{
		{Name: "a", MilliCPU: 4000, Units: 700, Allocation: gpumem.Allocation{"0": {1: 700}}},
		{Name: "b", MilliCPU: 0, Units: 2000, Allocation: gpumem.Allocation{"0": {2: 1000, 3: 1000}}},
	}
	p := NewOnline()
	p.Rebuild([]*placement.NodeInfo{node})
	want := []TaskType{
		{TaskShape: TaskShape{MilliCPU: 4000, GPUs: 1, PerGPU: 700}, Weight: 0.5},
		{TaskShape: TaskShape{MilliCPU: minTaskCPU, GPUs: 2, PerGPU: 1000}, Weight: 0.5},
	}
	got := p.learned.current.Load().Types()
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9), cmpopts.IgnoreUnexported(TaskType{})); diff != "" {
		t.Errorf("Types after Rebuild (-want,+got):\n%s", diff)
	}
}
