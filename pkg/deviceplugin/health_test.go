package deviceplugin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// healthPods are a pod on each of two cards, a finished one on card 1 and a two-card one.
func healthPods() []*v1.Pod {
	return []*v1.Pod{
		st.MakePod().Name("on-0").Node(testNode).NamedGPUMem("c", 2).Allocation(contract.Allocation{"0": {0: 2}}).Obj(),
		st.MakePod().Name("on-1").Node(testNode).NamedGPUMem("c", 3).Allocation(contract.Allocation{"0": {1: 3}}).Obj(),
		st.MakePod().Name("done-on-1").Node(testNode).NamedGPUMem("c", 1).Allocation(contract.Allocation{"0": {1: 1}}).Phase(v1.PodSucceeded).Obj(),
		st.MakePod().Name("on-both").Node(testNode).NamedGPUMem("c", 2).Annotation(contract.DefaultGPUsPerContainer, "2").
			Allocation(contract.Allocation{"0": {0: 1, 1: 1}}).Obj(),
	}
}

// TestCriticalXIDTakesTheWholeCard: a critical XID on a card makes every one of its units
// Unhealthy for kubelet (not some: k8s-device-plugin#1929), healthy false in the node
// annotation, and a Warning event naming the card, the XID and the node on each pod still
// placed on it, once.
func TestCriticalXIDTakesTheWholeCard(t *testing.T) {
	tests := []struct {
		name        string
		ev          nvml.Event
		wantHealth  map[string]int
		wantHealthy []bool
		wantEvents  map[string][]int // pod → cards its events name
	}{
		{name: "XID 79 on GPU 1", ev: nvml.Event{UUID: uuid(1), XID: 79},
			wantHealth: map[string]int{"Healthy@0": 4, "Unhealthy@1": 8}, wantHealthy: []bool{true, false},
			wantEvents: map[string][]int{"on-1": {1}, "on-both": {1}}},
		{name: "an XID that names no card takes every card", ev: nvml.Event{XID: 48},
			wantHealth: map[string]int{"Unhealthy@0": 4, "Unhealthy@1": 8}, wantHealthy: []bool{false, false},
			wantEvents: map[string][]int{"on-0": {0}, "on-1": {1}, "on-both": {0, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, noPodResources, mockhost.Options{GPUs: 2, MemoryBytes: 4 << 30, MemoryByIndex: map[int]uint64{1: 8 << 30}}, healthPods()...)
			generateNames(h.client)
			h.p.markUnhealthy(h.ctx, tt.ev)
			h.p.markUnhealthy(h.ctx, tt.ev) // again: nothing changes, no second event
			if diff := cmp.Diff(tt.wantHealth, healthByCard(h.p)); diff != "" {
				t.Errorf("devices by health (-want,+got):\n%s", diff)
			}
			var healthy []bool
			for _, g := range h.p.GPUs() {
				healthy = append(healthy, g.Healthy)
			}
			if diff := cmp.Diff(tt.wantHealthy, healthy); diff != "" {
				t.Errorf("healthy in the node annotation (-want,+got):\n%s", diff)
			}
			got := waitUnhealthyEvents(t, h, len(slices.Concat(mapValues(tt.wantEvents)...)))
			if diff := cmp.Diff(tt.wantEvents, got); diff != "" {
				t.Errorf("GPUUnhealthy events by pod (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestIgnoredXIDs: the default ignored XIDs leave the card healthy, the list is the
// operator's to change, and any other XID takes the card.
func TestIgnoredXIDs(t *testing.T) {
	tests := []struct {
		name      string
		opts      []Option
		inject    []uint64 // on GPU 1, in order; the last must take the card
		wantTaken uint64
	}{
		{name: "defaults: the application's XIDs are ignored, 79 is not", inject: []uint64{13, 31, 43, 45, 68, 109, 79}, wantTaken: 79},
		{name: "79 ignored by the operator, 48 is not", opts: []Option{WithIgnoredXIDs([]uint64{79})}, inject: []uint64{79, 48}, wantTaken: 48},
		{name: "nothing ignored: 13 takes the card", opts: []Option{WithIgnoredXIDs(nil)}, inject: []uint64{13}, wantTaken: 13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, noPodResources, mockhost.Options{GPUs: 2, MemoryBytes: 4 << 30}, tt.opts, healthPods()...)
			generateNames(h.client)
			ctx, cancel := context.WithCancel(h.ctx)
			done := make(chan struct{})
			go func() { defer close(done); h.p.watchHealth(ctx) }()
			defer func() { cancel(); <-done }()
			for _, xid := range tt.inject {
				h.host.InjectXID(1, xid)
			}
			got := waitUnhealthyEvents(t, h, 2)
			if diff := cmp.Diff(map[string][]int{"on-1": {1}, "on-both": {1}}, got); diff != "" {
				t.Errorf("GPUUnhealthy events by pod (-want,+got):\n%s", diff)
			}
			evs, err := h.client.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs.Items {
				if !strings.Contains(ev.Message, fmt.Sprintf("critical XID %d ", tt.wantTaken)) {
					t.Errorf("event %q: want it to name XID %d, the first one not ignored", ev.Message, tt.wantTaken)
				}
			}
			if diff := cmp.Diff(map[string]int{"Healthy@0": 4, "Unhealthy@1": 4}, healthByCard(h.p)); diff != "" {
				t.Errorf("devices by health (-want,+got):\n%s", diff)
			}
		})
	}
}

// generateNames makes the fake clientset name created events from their GenerateName, as the
// API server does (the fake refuses a second event without a name).
func generateNames(client *k8sfake.Clientset) {
	var n atomic.Int64
	client.PrependReactor("create", "events", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if ev, ok := action.(k8stesting.CreateAction).GetObject().(*v1.Event); ok && ev.Name == "" {
			ev.Name = ev.GenerateName + strconv.FormatInt(n.Add(1), 10)
		}
		return false, nil, nil
	})
}

// healthByCard counts the plugin's devices by health and card index.
func healthByCard(p *Plugin) map[string]int {
	devs, _ := p.inv.devices()
	out := map[string]int{}
	for _, d := range devs {
		g, err := p.inv.gpuOf(d.ID)
		if err != nil {
			continue
		}
		health := d.Health
		if health != pluginapi.Healthy {
			health = pluginapi.Unhealthy
		}
		out[fmt.Sprintf("%s@%d", health, g)]++
	}
	return out
}

// waitUnhealthyEvents waits for n GPUUnhealthy events (they are recorded in the background),
// checks each names the node, and returns the cards they name by pod.
func waitUnhealthyEvents(t *testing.T, h *harness, n int) map[string][]int {
	t.Helper()
	var evs []v1.Event
	err := wait.PollUntilContextTimeout(h.ctx, 5*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := h.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		evs = list.Items
		return len(evs) >= n, nil
	})
	if err != nil {
		t.Fatalf("%d events, want %d: %v", len(evs), n, err)
	}
	time.Sleep(50 * time.Millisecond) // a late extra event would show now
	list, err := h.client.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	for _, ev := range list.Items {
		var card int
		if _, err := fmt.Sscanf(ev.Message, "GPU %d ", &card); err != nil || ev.Reason != ReasonGPUUnhealthy || ev.Type != v1.EventTypeWarning ||
			!strings.Contains(ev.Message, "on node "+testNode+" had critical XID") || !strings.Contains(ev.Message, uuid(card)) {
			t.Errorf("event %s %s %q: want a Warning %s naming the card, its UUID, the node and the XID", ev.Type, ev.Reason, ev.Message, ReasonGPUUnhealthy)
			continue
		}
		out[ev.InvolvedObject.Name] = append(out[ev.InvolvedObject.Name], card)
	}
	for _, cards := range out {
		slices.Sort(cards)
	}
	return out
}

func mapValues(m map[string][]int) [][]int {
	var out [][]int
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
