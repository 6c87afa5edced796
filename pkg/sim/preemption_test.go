package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// qosPod is a one-card pod of class qos asking milli of its card, half a CPU and 512 MiB.
func qosPod(name, qos string, milli int64) Pod {
	return Pod{Name: name, MilliCPU: 500, MemoryMiB: 512, NumGPU: 1, GPUMilli: milli, QoS: qos}
}

// placeInOrder submits pods in their order to a fresh cluster of nodes (binpack, ties in node
// order), each with its qos priority and, with preempt, preempting; it returns which were
// placed, the pods evicted and the preempter's counts.
func placeInOrder(t *testing.T, nodes []Node, pods []Pod, preempt bool) (placed []bool, evicted []string, e *preempter) {
	t.Helper()
	names := contract.DefaultNames()
	c := cache.New(names, klog.Background().V(10))
	if err := newCluster(nodes, &names, c, false); err != nil {
		t.Fatal(err)
	}
	policy, err := policies.NewRegistry().New("binpack")
	if err != nil {
		t.Fatal(err)
	}
	perm := make([]int, len(nodes))
	for i := range perm {
		perm[i] = i
	}
	p := newPlacer(nodes, c, policy, perm)
	if preempt {
		p.preempt = &preempter{}
	}
	for i := range pods {
		pod := PodObject(&pods[i], i, &names)
		prio, err := QoSPriority(pods[i].QoS)
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.Priority = &prio
		ok, err := p.submit(pod, &names)
		if err != nil {
			t.Fatal(err)
		}
		placed = append(placed, ok)
	}
	for i := range pods {
		if _, there := c.Pod(PodObject(&pods[i], i, &names).UID); placed[i] && !there {
			evicted = append(evicted, pods[i].Name)
		}
	}
	if p.preempt == nil {
		p.preempt = &preempter{}
	}
	return placed, evicted, p.preempt
}

func TestPreemptionPlacer(t *testing.T) {
	cpuHog := Pod{Name: "cpu-hog", MilliCPU: 6000, MemoryMiB: 512, QoS: QoSBE}
	tests := []struct {
		name        string
		nodes       []Node
		pods        []Pod
		preempt     bool
		wantPlaced  []bool
		wantEvicted []string
		wantUnits   int64 // evicted milli-GPU
	}{
		{name: "LS preempts BE", nodes: synthNodes(1, 1), preempt: true,
			pods:       []Pod{qosPod("be", QoSBE, 600), qosPod("ls", QoSLS, 600)},
			wantPlaced: []bool{true, true}, wantEvicted: []string{"be"}, wantUnits: 600},
		{name: "without preemption the LS pod is rejected", nodes: synthNodes(1, 1),
			pods:       []Pod{qosPod("be", QoSBE, 600), qosPod("ls", QoSLS, 600)},
			wantPlaced: []bool{true, false}},
		{name: "equal priority does not preempt", nodes: synthNodes(1, 1), preempt: true,
			pods:       []Pod{qosPod("ls-a", QoSLS, 600), qosPod("ls-b", QoSLS, 600)},
			wantPlaced: []bool{true, false}},
		{name: "BE preempts nothing", nodes: synthNodes(1, 1), preempt: true,
			pods:       []Pod{qosPod("burstable", QoSBurstable, 600), qosPod("be", QoSBE, 600)},
			wantPlaced: []bool{true, false}},
		{name: "Guaranteed evicts the lowest priority of two single victims", nodes: synthNodes(1, 2), preempt: true,
			pods:       []Pod{qosPod("ls", QoSLS, 600), qosPod("burstable", QoSBurstable, 600), qosPod("g", QoSGuaranteed, 600)},
			wantPlaced: []bool{true, true, true}, wantEvicted: []string{"burstable"}, wantUnits: 600},
		{name: "fewest victims: one pod on one card rather than two on the other", nodes: synthNodes(1, 2), preempt: true,
			pods:       []Pod{qosPod("be-a", QoSBE, 300), qosPod("be-b", QoSBE, 300), qosPod("be-c", QoSBE, 500), qosPod("ls", QoSLS, 900)},
			wantPlaced: []bool{true, true, true, true}, wantEvicted: []string{"be-c"}, wantUnits: 500},
		{name: "a pod of two cards does not preempt", nodes: synthNodes(1, 2), preempt: true,
			pods:       []Pod{qosPod("be", QoSBE, 600), {Name: "ls-2", MilliCPU: 500, MemoryMiB: 512, NumGPU: 2, GPUMilli: 1000, QoS: QoSLS}},
			wantPlaced: []bool{true, false}},
		{name: "no preemption where the pod's CPU would not fit after it", nodes: synthNodes(1, 1), preempt: true,
			pods:       []Pod{cpuHog, qosPod("be", QoSBE, 600), {Name: "ls", MilliCPU: 2500, MemoryMiB: 512, NumGPU: 1, GPUMilli: 600, QoS: QoSLS}},
			wantPlaced: []bool{true, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			placed, evicted, e := placeInOrder(t, tt.nodes, tt.pods, tt.preempt)
			if diff := cmp.Diff(tt.wantPlaced, placed); diff != "" {
				t.Errorf("placed (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEvicted, evicted, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("evicted (-want,+got):\n%s", diff)
			}
			wantCounts := [3]int64{int64(min(len(tt.wantEvicted), 1)), int64(len(tt.wantEvicted)), tt.wantUnits}
			if got := [3]int64{int64(e.preemptions), int64(e.victims), e.evicted}; got != wantCounts {
				t.Errorf("preemptions, victims, evicted milli = %v, want %v", got, wantCounts)
			}
		})
	}
}

// TestPreemptionRun replays a BE and an LS pod that share one card's worth of room: the LS pod
// preempts when it comes second and the BE pod is rejected when it does, and the allocation
// curves account for the eviction. A run without the options is the default run, and one
// with priorities only places the same pods.
func TestPreemptionRun(t *testing.T) {
	pods := []Pod{qosPod("be", QoSBE, 600), qosPod("ls", QoSLS, 600)}
	type outcome struct {
		Placed, Preemptions, Preempted int
		Evicted                        int64
		Final, FinalHigh               float64 // the curves' last points (%)
	}
	for seed := uint64(1); seed <= 4; seed++ {
		lsLast := Workload(pods, 1200, newRand(seed))[1].Name == "ls"
		tests := []struct {
			name                   string
			priorities, preemption bool
			want                   outcome
		}{
			{"default", false, false, outcome{Placed: 1, Final: 60, FinalHigh: -1}},
			{"priorities only", true, false, outcome{Placed: 1, Final: 60, FinalHigh: map[bool]float64{true: 0, false: 60}[lsLast]}},
			{"preemption", false, true, map[bool]outcome{
				true:  {Placed: 2, Preemptions: 1, Preempted: 1, Evicted: 600, Final: 60, FinalHigh: 60},
				false: {Placed: 1, Final: 60, FinalHigh: 60},
			}[lsLast]},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p, err := policies.NewRegistry().New("binpack")
				if err != nil {
					t.Fatal(err)
				}
				run := &Run{Nodes: synthNodes(1, 1), Pods: pods, Policy: p, Inflate: 1.2, Seed: seed, Priorities: tt.priorities, Preemption: tt.preemption}
				res, err := run.Execute()
				if err != nil {
					t.Fatal(err)
				}
				got := outcome{Placed: res.Placed, Preemptions: res.Preemptions, Preempted: res.Preempted, Evicted: res.EvictedMilli,
					Final: res.Curve[len(res.Curve)-1], FinalHigh: -1}
				if res.HighCurve != nil {
					got.FinalHigh = res.HighCurve[len(res.HighCurve)-1]
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("seed %d, LS last %v: outcome (-want,+got):\n%s", seed, lsLast, diff)
				}
			})
		}
	}
}

// TestPreemptionOffIsTheDefault: the same run without preemption, with or without priorities,
// places the same pods on the same nodes and draws the same curve.
func TestPreemptionOffIsTheDefault(t *testing.T) {
	pods := append(sharingPods(12, 700), qosPod("ls-a", QoSLS, 400), qosPod("g", QoSGuaranteed, 900))
	base := execute(t, "binpack", synthNodes(3, 2), pods, 1.3, 9)
	for _, prio := range []bool{false, true} {
		p, err := policies.NewRegistry().New("binpack")
		if err != nil {
			t.Fatal(err)
		}
		res, err := (&Run{Nodes: synthNodes(3, 2), Pods: pods, Policy: p, Inflate: 1.3, Seed: 9, Priorities: prio}).Execute()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(base.Curve, res.Curve, cmpopts.EquateNaNs()); diff != "" || !cmp.Equal(base.Nodes, res.Nodes) {
			t.Errorf("priorities %v: the curve or the nodes differ from the default run (-want,+got):\n%s", prio, diff)
		}
		if (res.HighCurve != nil) != prio {
			t.Errorf("priorities %v: HighCurve %v", prio, res.HighCurve)
		}
	}
}

func TestQoSPriority(t *testing.T) {
	tests := []struct {
		qos     string
		want    int32
		wantErr error
	}{
		{qos: QoSGuaranteed, want: 3000},
		{qos: QoSLS, want: 2000},
		{qos: QoSBurstable, want: 1000},
		{qos: QoSBE, want: 0},
		{qos: "", want: 0},
		{qos: "Gold", wantErr: ErrBadTrace},
	}
	for _, tt := range tests {
		t.Run(tt.qos, func(t *testing.T) {
			got, err := QoSPriority(tt.qos)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("QoSPriority(%q) = %d, %v; want %d, %v", tt.qos, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestWritePreemption(t *testing.T) {
	flat := func(v float64) []float64 {
		out := make([]float64, 131)
		for i := range out {
			out[i] = v
		}
		return out
	}
	off := &Result{Curve: flat(90), HighCurve: flat(30), Submitted: 3, CapacityMilli: 2000, Seconds: 1}
	on := &Result{Curve: flat(95), HighCurve: flat(40), Submitted: 3, CapacityMilli: 2000, Seconds: 1,
		Preemptions: 2, Preempted: 3, EvictedMilli: 1500}
	sums := []*Summary{Summarise("binpack", "t", []int{1}, []*Result{off}), Summarise("binpack", "t", []int{1}, []*Result{on})}
	sums[1].Preemption.On = true
	tests := []struct {
		name  string
		write func(*strings.Builder) error
		want  string
	}{
		{name: "table", write: func(b *strings.Builder) error { return WriteTable(b, sums) }, want: "" +
			"   policy  trace  seeds  alloc@100 %    sd  alloc@130 %    sd  unalloc GPUs@100  pods  s/run  preemption  above-BE alloc@100 %    sd  preemptions  pods preempted  GPUs evicted\n" +
			"  binpack      t      1        90.00  0.00        90.00  0.00               0.2     3   1.00         off                 30.00  0.00          0.0             0.0           0.0\n" +
			"  binpack      t      1        95.00  0.00        95.00  0.00               0.1     3   1.00          on                 40.00  0.00          2.0             3.0           1.5\n"},
		{name: "markdown", write: func(b *strings.Builder) error { return WriteMarkdown(b, sums) }, want: "" +
			"#### t, qos priorities (1 seeds)\n\n" +
			"| policy | preemption | alloc@100 % (mean ± sd) | alloc@130 % | above-BE alloc@100 % | preemptions | pods preempted | GPUs evicted | s/run |\n" +
			"|---|---|---|---|---|---|---|---|---|\n" +
			"| binpack | off | 90.00 ± 0.00 | 90.00 ± 0.00 | 30.00 ± 0.00 | 0.0 | 0.0 | 0.0 | 1.00 |\n" +
			"| binpack | on | 95.00 ± 0.00 | 95.00 ± 0.00 | 40.00 ± 0.00 | 2.0 | 3.0 | 1.5 | 1.00 |\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := tt.write(&b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("output (-want,+got):\n%s", diff)
			}
		})
	}
}
