package scheduler_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// TestBindRecordsGPUAssigned: a bound gpu-mem pod gets one Normal GPUAssigned event naming the
// node and each card with its model, UUID and units; a pod without gpu-mem and a refused bind
// get none.
func TestBindRecordsGPUAssigned(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 32).Obj()}
	e := newEnvOpts(t, newPolicy(t, "binpack"), []scheduler.Option{scheduler.WithEventRecorder(rec)}, nodes,
		st.MakePod().Name("one").GPUMem(20).Obj(),
		st.MakePod().Name("split").GPUMem(16).Annotation("gpushare.io/gpu-count", "2").Obj(),
		st.MakePod().Name("huge").GPUMem(64).Obj())
	for _, name := range []string{"one", "split"} {
		if err := e.ext.Bind(e.ctx, bindArgs(name, "n1")); err != nil {
			t.Fatalf("bind %s: %v", name, err)
		}
	}
	if err := e.ext.Bind(e.ctx, bindArgs("huge", "n1")); err == nil {
		t.Fatal("a 64-unit pod bound on 16+32 units")
	}
	close(rec.Events)
	var got []string
	for ev := range rec.Events {
		got = append(got, ev)
	}
	want := []string{
		"Normal GPUAssigned 20 GiB of GPU memory on node n1: 20 GiB on card 1 (Tesla T4, GPU-n1-1)",
		"Normal GPUAssigned 16 GiB of GPU memory on node n1: 8 GiB on card 0 (Tesla T4, GPU-n1-0), 8 GiB on card 1 (Tesla T4, GPU-n1-1)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

// TestBindDropsEventsOverRate: with WithEventRate, binds beyond the rate's burst still bind,
// but their GPUAssigned events are dropped and counted in gpushare_events_dropped_total.
func TestBindDropsEventsOverRate(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}
	names := []string{"a", "b", "c", "d"}
	var pods []*v1.Pod
	for _, n := range names {
		pods = append(pods, st.MakePod().Name(n).GPUMem(4).Obj())
	}
	opts := []scheduler.Option{scheduler.WithEventRecorder(rec), scheduler.WithEventRate(0.001, 2)}
	e := newEnvOpts(t, newPolicy(t, "binpack"), opts, nodes, pods...)
	for _, n := range names {
		if err := e.ext.Bind(e.ctx, bindArgs(n, "n1")); err != nil {
			t.Fatalf("bind %s: %v", n, err)
		}
	}
	close(rec.Events)
	recorded := 0
	for range rec.Events {
		recorded++
	}
	if recorded != 2 {
		t.Errorf("recorded %d events, want the burst's 2", recorded)
	}
	if n, _ := e.ext.Cache().Node("n1"); n.UsedUnits() != 16 {
		t.Errorf("n1 has %d units used after binding four 4-unit pods, want 16", n.UsedUnits())
	}
	families, err := e.ext.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	dropped := -1.0
	for _, f := range families {
		if f.GetName() == "gpushare_events_dropped_total" {
			dropped = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if dropped != 2 {
		t.Errorf("gpushare_events_dropped_total = %v, want 2", dropped)
	}
}
