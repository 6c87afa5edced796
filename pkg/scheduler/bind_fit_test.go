package scheduler_test

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// TestBindRefusesWhatDoesNotFitCPUMemory: bind refuses a pod whose CPU or memory request does
// not fit in the node's allocatable (64 CPUs, 256 GiB) less the requests of the pods bound
// there, as kube-scheduler's NodeResourcesFit would; a pod that fits is bound.
func TestBindRefusesWhatDoesNotFitCPUMemory(t *testing.T) {
	const gib = int64(1) << 30
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}
	// busy holds 60 CPUs and 200 GiB of n1.
	busy := st.MakePod().Name("busy").Container().CPU(60000, 200*gib).Node("n1").Obj()
	tests := []struct {
		name     string
		pod      *v1.Pod
		wantErr  error
		wantNode string
	}{
		{name: "1,000 CPUs on a 64-CPU node", pod: st.MakePod().Name("p").GPUMem(4).CPU(1000000, gib).Obj(), wantErr: scheduler.ErrInsufficientResources},
		{name: "8 CPUs where 4 are left", pod: st.MakePod().Name("p").GPUMem(4).CPU(8000, gib).Obj(), wantErr: scheduler.ErrInsufficientResources},
		{name: "64 GiB where 56 are left", pod: st.MakePod().Name("p").GPUMem(4).CPU(1000, 64*gib).Obj(), wantErr: scheduler.ErrInsufficientResources},
		{name: "4 CPUs and 56 GiB fit exactly", pod: st.MakePod().Name("p").GPUMem(4).CPU(4000, 56*gib).Obj(), wantNode: "n1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "binpack", nodes, busy, tt.pod)
			err := e.ext.Bind(e.ctx, bindArgs("p", "n1"))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Bind() = %v, want %v", err, tt.wantErr)
			}
			if got := e.apiPod(t, "p").Spec.NodeName; got != tt.wantNode {
				t.Errorf("pod bound to %q, want %q", got, tt.wantNode)
			}
			if tt.wantErr != nil {
				if n, _ := e.cache.Node("n1"); n.GPUs[0].Used+n.GPUs[1].Used != 0 {
					t.Errorf("a refused bind left %d units charged", n.GPUs[0].Used+n.GPUs[1].Used)
				}
			}
		})
	}
}
