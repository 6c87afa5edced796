package deviceplugin

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// TestAfterPluginRestart: a pod allocated before the plugin restarted is known only to the
// kubelet; it must not be chosen again, and it still gets marked assigned.
func TestAfterPluginRestart(t *testing.T) {
	old := st.MakePod().Name("old").Node(testNode).Created(t0).NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {0: 4}}).Obj()
	tests := []struct {
		name         string
		mode         kubeletMode
		wantNewGPU   string
		wantAssigned map[string]string
	}{
		{name: "kubelet view available", mode: listBeforeAdmit, wantNewGPU: "1",
			wantAssigned: map[string]string{"old": "true", "new": "true"}},
		{name: "no kubelet view: the older pod is wrongly taken", mode: noPodResources, wantNewGPU: "0",
			wantAssigned: map[string]string{"old": "true", "new": "false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newer := st.MakePod().Name("new").Node(testNode).Created(t0.Add(time.Second)).NamedGPUMem("c", 4).
				Allocation(contract.Allocation{"0": {1: 4}}).Obj()
			h := newHarness(t, tt.mode, mockhost.Options{MemoryBytes: 40 << 30}, old, newer)
			h.kubelet.AddPod(old) // allocated by the previous plugin process
			h.kubelet.SetDevices(old, "c", contract.DefaultResourceName, []string{uuid(0) + "::0", uuid(0) + "::1", uuid(0) + "::2", uuid(0) + "::3"})
			h.free = h.free[4:]
			env := h.admit(newer)
			if got := env["c"][contract.EnvIndex]; got != tt.wantNewGPU {
				t.Errorf("new pod got GPU %s, want %s", got, tt.wantNewGPU)
			}
			h.p.ReconcileOnce(h.ctx)
			got := map[string]string{}
			for _, p := range []*v1.Pod{old, newer} {
				got[p.Name] = h.pod(p.Name).Annotations[contract.AnnotationAssigned]
			}
			if diff := cmp.Diff(tt.wantAssigned, got); diff != "" {
				t.Errorf("assigned (-want,+got):\n%s", diff)
			}
		})
	}
}
