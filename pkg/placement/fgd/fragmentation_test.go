package fgd

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// fragNode builds a node with one card per free value (capacity 1000, model T4) and cpu
// millicores free.
func fragNode(cpu int64, free ...int64) *placement.NodeInfo {
	n := &placement.NodeInfo{Name: "n", AllocatableMilliCPU: 64000, RequestedMilliCPU: 64000 - cpu}
	for i, f := range free {
		n.GPUs = append(n.GPUs, placement.GPUInfo{Index: i, Model: "Tesla T4", Capacity: 1000, Used: 1000 - f, Healthy: true})
	}
	return n
}

func TestFragmentation(t *testing.T) {
	half := TaskShape{MilliCPU: 2000, GPUs: 1, PerGPU: 500}
	whole := TaskShape{MilliCPU: 4000, GPUs: 1, PerGPU: 1000}
	cpuOnly := TaskShape{MilliCPU: 1000}
	pair := TaskShape{MilliCPU: 1000, GPUs: 2, PerGPU: 1000}
	v100 := TaskShape{MilliCPU: 2000, GPUs: 1, PerGPU: 500, Models: "V100"}
	mix := map[TaskShape]float64{half: 2, whole: 1, cpuOnly: 1}
	tests := []struct {
		name   string
		counts map[TaskShape]float64
		node   *placement.NodeInfo
		want   float64
	}{
		// half: 300 is too small (300); whole: 300 (300); CPU-only: all idle (1300).
		{"fits, fragments below each ask", mix, fragNode(10000, 1000, 300), 0.5*300 + 0.25*300 + 0.25*1300},
		// whole lacks CPU (4000 > 3000): all idle counts for it.
		{"CPU short for one type", mix, fragNode(3000, 1000, 300), 0.5*300 + 0.25*1300 + 0.25*1300},
		// no card has 500 free: every GPU type sees all idle units.
		{"no card fits", mix, fragNode(10000, 400, 300), 700},
		{"full node has no fragments", mix, fragNode(10000, 0, 0), 0},
		// pair needs two whole cards: with one it sees all idle, with two only the 300.
		{"two cards needed, one free", map[TaskShape]float64{pair: 1}, fragNode(10000, 1000, 300), 1300},
		{"two cards needed, two free", map[TaskShape]float64{pair: 1}, fragNode(10000, 1000, 1000, 300), 300},
		// the V100 type cannot use T4 cards at all.
		{"model not accepted", map[TaskShape]float64{v100: 1, half: 1}, fragNode(10000, 1000, 300), 0.5*1300 + 0.5*300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fragmentation(tt.node, TypicalDistribution(tt.counts, 1))
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("Fragmentation (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTypicalDistribution(t *testing.T) {
	a := TaskShape{MilliCPU: 1000, GPUs: 1, PerGPU: 500}
	b := TaskShape{MilliCPU: 2000, GPUs: 1, PerGPU: 500}
	c := TaskShape{MilliCPU: 500, GPUs: 1, PerGPU: 500}
	tests := []struct {
		name     string
		counts   map[TaskShape]float64
		coverage float64
		want     []TaskType
	}{
		{"all kept", map[TaskShape]float64{a: 2, b: 1, c: 1}, 1,
			[]TaskType{{TaskShape: a, Weight: 0.5}, {TaskShape: b, Weight: 0.25}, {TaskShape: c, Weight: 0.25}}},
		// 2/4 < 0.7 <= 3/4: two shapes; the tie between b and c goes to the larger CPU.
		{"prefix reaching coverage, ties to the larger shape", map[TaskShape]float64{a: 2, b: 1, c: 1}, 0.7,
			[]TaskType{{TaskShape: a, Weight: 2.0 / 3}, {TaskShape: b, Weight: 1.0 / 3}}},
		{"empty", map[TaskShape]float64{}, 0.95, []TaskType{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TypicalDistribution(tt.counts, tt.coverage).Types()
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9), cmpopts.IgnoreUnexported(TaskType{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Types (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSigmoidStepsMatchFormula(t *testing.T) {
	steps := newSigmoidSteps()
	deltas := []float64{-1e6, -4595.1, -1000, -40, -1, 0, 1, 40, 41, 1000, 4595.1, 1e6}
	deltas = append(deltas, steps.at[:]...)
	for _, at := range steps.at {
		deltas = append(deltas, math.Nextafter(at, math.Inf(-1)), math.Nextafter(at, math.Inf(1)))
	}
	for _, d := range deltas {
		if got, want := steps.score(d), sigmoidScore(d); got != want {
			t.Errorf("score(%v) = %v, formula says %v", d, got, want)
		}
	}
	tests := []struct {
		delta float64
		want  float64
	}{{0, 50}, {-1e6, 100}, {-4000, 98}, {1e6, 0}, {1000, 26}}
	for _, tt := range tests {
		if got := steps.score(tt.delta); got != tt.want {
			t.Errorf("score(%v) = %v, want %v", tt.delta, got, tt.want)
		}
	}
}

func TestSlivers(t *testing.T) {
	dist := TypicalDistribution(map[TaskShape]float64{{MilliCPU: 1000, GPUs: 1, PerGPU: 500}: 1}, 1)
	tests := []struct {
		name  string
		free  []int64
		card  int
		units int64
		want  float64
	}{
		{"leaves 150, a sliver", []int64{650, 1000}, 0, 500, 150},
		{"leaves 200, a fifth: not a sliver", []int64{700, 1000}, 0, 500, 0},
		{"fills the card exactly", []int64{500, 1000}, 0, 500, 0},
		{"leaves 500", []int64{650, 1000}, 1, 500, 0},
		{"fills a sliver in", []int64{1000, 150}, 1, 150, -150},
		{"shrinks a sliver from 190 to 30", []int64{1000, 190}, 1, 160, -160},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := fragNode(10000, tt.free...)
			s := newFragScorer(dist, newFragViews(), placement.PodResources{MilliCPU: 1000})
			s.use(node)
			req := &gpumem.PodRequest{Containers: []gpumem.ContainerRequest{{Key: "0", Units: tt.units, GPUs: 1}}}
			plan := &placement.Plan{Slots: []placement.Slot{{GPU: tt.card, Units: tt.units}}}
			if got := s.slivers(node, plan, req); got != tt.want {
				t.Errorf("slivers = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFragOneCardMatchesFrag: the per-card shortcut gives exactly (same float) what the full sum
// gives, on random nodes (unhealthy cards, mixed models, more than 64 cards) and distributions
// (multi-card, model-constrained and CPU-only types, CPU that some types do not fit).
func TestFragOneCardMatchesFrag(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	models := newModelMatcher()
	for trial := range 200 {
		counts := map[TaskShape]float64{}
		for range 1 + rng.IntN(40) {
			s := TaskShape{MilliCPU: 100 * (1 + rng.Int64N(80)), GPUs: rng.IntN(4)}
			if s.GPUs > 0 {
				s.PerGPU = 1 + rng.Int64N(1000)
				if s.GPUs > 1 {
					s.PerGPU = 1000
				}
				s.Models = []string{"", "", "A100", "T4|A100"}[rng.IntN(4)]
			}
			counts[s] += float64(1 + rng.IntN(9))
		}
		d := TypicalDistribution(counts, 0.5+rng.Float64()/2)
		cards := 1 + rng.IntN(10)
		if trial%20 == 0 {
			cards = 70
		}
		node := &placement.NodeInfo{Name: "n", AllocatableMilliCPU: 64000, RequestedMilliCPU: rng.Int64N(64000)}
		for c := range cards {
			node.GPUs = append(node.GPUs, placement.GPUInfo{Index: c, Model: []string{"T4", "A100"}[rng.IntN(2)],
				Capacity: 1000, Used: rng.Int64N(1001), Healthy: rng.IntN(6) > 0})
		}
		v := newFragView(node, d, models)
		podCPU := rng.Int64N(8000)
		weights := make([]float64, len(d.groups))
		for i := range d.groups {
			weights[i] = d.groups[i].weightFitting(v.cpu - podCPU)
		}
		for c := range cards {
			units := rng.Int64N(v.free[c] + 1)
			work := append([]int64(nil), v.free...)
			work[c] -= units
			want := v.frag(d, work, v.cpu-podCPU, nil)
			if got := v.frag(d, work, v.cpu-podCPU, weights); got != want {
				t.Fatalf("trial %d, card %d, %d units: frag with weights = %v, without = %v", trial, c, units, got, want)
			}
			if got := v.fragOneCard(d, c, units, weights); got != want {
				t.Fatalf("trial %d, card %d, %d units: fragOneCard = %v, frag = %v", trial, c, units, got, want)
			}
		}
	}
}
