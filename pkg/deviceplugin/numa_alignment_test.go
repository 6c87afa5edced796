package deviceplugin

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// numaOfDevices maps every advertised device ID to the NUMA node it carries (-1: none).
func numaOfDevices(p *Plugin) map[string]int64 {
	devs, _ := p.inv.devices()
	out := make(map[string]int64, len(devs))
	for _, d := range devs {
		out[d.ID] = -1
		if d.Topology != nil && len(d.Topology.Nodes) == 1 {
			out[d.ID] = d.Topology.Nodes[0].ID
		}
	}
	return out
}

// TestPreferredNamesThePlacement: with every device offered (no Topology Manager), kubelet is
// steered to units of exactly the placement's cards, as many on each as the placement puts
// there, and those devices carry the cards' NUMA nodes (the 8-card mock: 0-3 on node 0).
func TestPreferredNamesThePlacement(t *testing.T) {
	tests := []struct {
		name      string
		pod       *v1.Pod
		size      int32
		wantCards map[int]int64
		wantNUMA  []int64
	}{
		{name: "one card on NUMA node 1", size: 4, wantCards: map[int]int64{5: 4}, wantNUMA: []int64{1},
			pod: st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {5: 4}}).Obj()},
		{name: "two NVLinked cards on one node", size: 8, wantCards: map[int]int64{1: 4, 2: 4}, wantNUMA: []int64{0},
			pod: st.MakePod().Name("p").Node(testNode).Annotation(contract.DefaultGPUsPerContainer, "2").NamedGPUMem("c", 8).
				Allocation(contract.Allocation{"0": {1: 4, 2: 4}}).Obj()},
		{name: "four cards over both nodes", size: 8, wantCards: map[int]int64{0: 2, 3: 2, 4: 2, 7: 2}, wantNUMA: []int64{0, 1},
			pod: st.MakePod().Name("p").Node(testNode).Annotation(contract.DefaultGPUsPerContainer, "4").NamedGPUMem("c", 8).
				Allocation(contract.Allocation{"0": {0: 2, 3: 2, 4: 2, 7: 2}}).Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, listBeforeAdmit, mockhost.Options{MemoryBytes: 16 << 30}, tt.pod)
			numa := numaOfDevices(h.p)
			ids := h.preferred(tt.size)
			if diff := cmp.Diff(tt.wantCards, h.p.cardsOf(ids)); diff != "" {
				t.Errorf("preferred units per card (-want,+got):\n%s", diff)
			}
			var nodes []int64
			for _, id := range ids {
				if !slices.Contains(nodes, numa[id]) {
					nodes = append(nodes, numa[id])
				}
			}
			slices.Sort(nodes)
			if diff := cmp.Diff(tt.wantNUMA, nodes); diff != "" {
				t.Errorf("NUMA nodes of the preferred devices (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestKubeletAlignedToAnotherNUMANode plays kubelet's Topology Manager offering only the
// devices of one NUMA node: when that node holds the placement's card, the preference names
// it and nothing is reported; when it does not, the container still gets its placement's card
// (the env) and its pod a GPUShareTopologyMismatch event.
func TestKubeletAlignedToAnotherNUMANode(t *testing.T) {
	tests := []struct {
		name      string
		offerNUMA int64
		wantEvent bool
	}{
		{name: "kubelet aligned to the card's node", offerNUMA: 1},
		{name: "kubelet aligned to the other node", offerNUMA: 0, wantEvent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {5: 4}}).Obj()
			h := newHarness(t, listBeforeAdmit, mockhost.Options{MemoryBytes: 16 << 30}, pod)
			h.kubelet.AddPod(pod)
			numa := numaOfDevices(h.p)
			offered := slices.DeleteFunc(slices.Clone(h.free), func(id string) bool { return numa[id] != tt.offerNUMA })
			pref, err := h.p.GetPreferredAllocation(h.ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
				{AvailableDeviceIDs: offered, AllocationSize: 4}}})
			if err != nil {
				t.Fatal(err)
			}
			ids := pref.ContainerResponses[0].DeviceIDs
			if len(ids) != 4 {
				t.Fatalf("preferred %d IDs, want 4", len(ids))
			}
			if got := slices.Sorted(maps.Keys(h.p.cardsOf(ids))); tt.offerNUMA == 1 && !slices.Equal(got, []int{5}) {
				t.Errorf("preferred cards %v, want [5]", got)
			}
			resp, err := h.p.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.ContainerResponses[0].Envs[contract.EnvIndex]; got != "5" {
				t.Errorf("%s = %q, want the placement's card 5", contract.EnvIndex, got)
			}
			if got := eventuallyHasEvent(t, h, ReasonTopologyMismatch, tt.wantEvent); got != tt.wantEvent {
				t.Errorf("%s event: %t, want %t", ReasonTopologyMismatch, got, tt.wantEvent)
			}
		})
	}
}

// eventuallyHasEvent reports whether an event with reason shows up: it waits up to 5 s for
// one when want, 200 ms otherwise (events are recorded in the background).
func eventuallyHasEvent(t *testing.T, h *harness, reason string, want bool) bool {
	t.Helper()
	wait := 200 * time.Millisecond
	if want {
		wait = 5 * time.Second
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		evs, err := h.client.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == reason {
				return true
			}
		}
	}
	return false
}
