package deviceplugin

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// TestAllocateRefusesForgedPlacement: a placement annotation is only as good as whoever wrote
// it. A pod created with spec.nodeName and a hand-written placement that does not give a
// container its ask split evenly over its card count (gpushare.io/gpu-count) gets no env from
// Allocate: FailedPrecondition and a Warning Event on the pod, both naming the container, its
// ask and the placement; GetPreferredAllocation gives no preference for it. The containers
// before it in the pod, placed as they asked, are allocated.
func TestAllocateRefusesForgedPlacement(t *testing.T) {
	pod := func(count string) *st.PodWrapper {
		w := st.MakePod().Name("p").Node(testNode)
		if count != "" {
			w.Annotation(contract.DefaultGPUsPerContainer, count)
		}
		return w
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		// allowed are the containers allocated before the refused one
		allowed []string
		refused string
		wantMsg []string
	}{
		{name: "one unit asked, two whole cards placed",
			pod: pod("").NamedGPUMem("c", 1).Allocation(contract.Allocation{"0": {0: 16, 1: 16}}).Obj(), refused: "c",
			wantMsg: []string{`container "c"`, "asks 1 units over 1 GPU(s)", `{"0":16,"1":16}`}},
		{name: "one card, more units than asked",
			pod: pod("").NamedGPUMem("c", 1).Allocation(contract.Allocation{"0": {2: 16}}).Obj(), refused: "c",
			wantMsg: []string{`container "c"`, "asks 1 units", `{"2":16}`}},
		{name: "two cards asked, the total on one",
			pod: pod("2").NamedGPUMem("c", 8).Allocation(contract.Allocation{"0": {3: 8}}).Obj(), refused: "c",
			wantMsg: []string{"asks 8 units over 2 GPU(s), 4 on each", `{"3":8}`}},
		{name: "two cards asked, uneven split",
			pod: pod("2").NamedGPUMem("c", 8).Allocation(contract.Allocation{"0": {0: 6, 1: 2}}).Obj(), refused: "c",
			wantMsg: []string{"4 on each", `{"0":6,"1":2}`}},
		{name: "one card asked, half on each of two",
			pod: pod("").NamedGPUMem("c", 8).Allocation(contract.Allocation{"0": {0: 4, 1: 4}}).Obj(), refused: "c",
			wantMsg: []string{"asks 8 units over 1 GPU(s)", "8 units over 2 GPU(s)"}},
		{name: "an init container forged, after a valid one",
			pod: pod("").NamedInitGPUMem("i0", 2).NamedInitGPUMem("i1", 1).NamedGPUMem("a", 2).
				Allocation(contract.Allocation{"init-0": {0: 2}, "init-1": {0: 16, 1: 16}, "0": {0: 2}}).Obj(),
			allowed: []string{"i0"}, refused: "i1", wantMsg: []string{`container "i1" (key init-1)`}},
		{name: "the second app container forged",
			pod:     pod("").NamedGPUMem("a", 2).NamedGPUMem("b", 1).Allocation(contract.Allocation{"0": {4: 2}, "1": {5: 40}}).Obj(),
			allowed: []string{"a"}, refused: "b", wantMsg: []string{`container "b" (key 1) asks 1 units`, `{"5":40}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, listBeforeAdmit, mockhost.Options{MemoryBytes: 40 << 30}, tt.pod)
			h.kubelet.AddPod(tt.pod)
			units := containerUnits(tt.pod)
			for _, name := range tt.allowed {
				ids := h.preferred(int32(units[name])) //nolint:gosec // G115: a handful of units
				if _, err := h.allocate(ids); err != nil {
					t.Fatalf("Allocate for %s, placed as it asked: %v", name, err)
				}
				h.kubelet.SetDevices(tt.pod, name, contract.DefaultResourceName, ids)
			}
			n := units[tt.refused]
			pref, err := h.p.GetPreferredAllocation(h.ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
				{AvailableDeviceIDs: h.free, AllocationSize: int32(n)}}}) //nolint:gosec // G115: a handful of units
			if err != nil || len(pref.ContainerResponses[0].DeviceIDs) != int(n) {
				t.Fatalf("GetPreferredAllocation = %v, %v; want %d IDs (no preference, never an error)", pref, err, n)
			}
			_, err = h.allocate(h.free[:n])
			if status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("Allocate for %s = %v, want FailedPrecondition", tt.refused, err)
			}
			msg := eventMessage(t, h, reasonAllocateFailed)
			for _, want := range append([]string{"default/p"}, tt.wantMsg...) {
				if !strings.Contains(err.Error(), want) || !strings.Contains(msg, want) {
					t.Errorf("error %q and event %q: want both to say %q", err, msg, want)
				}
			}
			if _, err := h.allocate(h.free[:n]); status.Code(err) != codes.NotFound {
				t.Errorf("Allocate after the refusal = %v, want NotFound (the pod is never a candidate again)", err)
			}
		})
	}
}

// allocate calls Allocate for one container with ids.
func (h *harness) allocate(ids []string) (*pluginapi.AllocateResponse, error) {
	return h.p.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
}

// containerUnits is each gpu-mem container's ask, by name.
func containerUnits(pod *v1.Pod) map[string]int64 {
	names := contract.DefaultNames()
	req, _ := contract.ParseRequest(pod, &names)
	out := map[string]int64{}
	for _, c := range req.Containers {
		out[c.Name] = c.Units
	}
	return out
}

// eventMessage waits for a Warning Event with reason on the harness's clientset and returns
// its message.
func eventMessage(t *testing.T, h *harness, reason string) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		evs, err := h.client.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Type == v1.EventTypeWarning {
				return e.Message
			}
		}
	}
	t.Fatalf("no Warning %s event", reason)
	return ""
}
