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
