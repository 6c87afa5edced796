package deviceplugin

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func uuid(i int) string { return fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", 0x6a5e0000+i, i) }

func TestAllocateEnv(t *testing.T) {
	host := mockhost.Options{MemoryBytes: 40 << 30, MemoryByIndex: map[int]uint64{1: 80 << 30}}
	tests := []struct {
		name string
		pod  *v1.Pod
		want map[string]map[string]string
	}{
		{
			name: "one container on GPU 3",
			pod:  st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {3: 4}}).Obj(),
			want: map[string]map[string]string{"c": env(uuid(3), "3", "4", "4", "40")},
		},
		{
			name: "larger card of a mixed node",
			pod:  st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 50).Allocation(contract.Allocation{"0": {1: 50}}).Obj(),
			want: map[string]map[string]string{"c": env(uuid(1), "1", "50", "50", "80")},
		},
		{
			name: "two cards for one container",
			pod: st.MakePod().Name("p").Node(testNode).Annotation(contract.DefaultGPUsPerContainer, "2").NamedGPUMem("c", 8).
				Allocation(contract.Allocation{"0": {5: 4, 2: 4}}).Obj(),
			want: map[string]map[string]string{"c": env(uuid(2)+","+uuid(5), "2,5", "8", "8", "40")},
		},
		{
			name: "init and two app containers, one without gpu-mem",
			pod: st.MakePod().Name("p").Node(testNode).NamedInitGPUMem("i", 6).NamedGPUMem("a", 2).NamedGPUMem("none", 0).NamedGPUMem("b", 3).
				Allocation(contract.Allocation{"init-0": {4: 6}, "0": {4: 2}, "2": {6: 3}}).Obj(),
			want: map[string]map[string]string{
				"i": env(uuid(4), "4", "6", "6", "40"),
				"a": env(uuid(4), "4", "6", "2", "40"),
				"b": env(uuid(6), "6", "6", "3", "40"),
			},
		},
		{
			name: "legacy index annotation only",
			pod:  st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 2).Annotation(contract.AnnotationIndex, "7").Obj(),
			want: map[string]map[string]string{"c": env(uuid(7), "7", "2", "2", "40")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, listBeforeAdmit, host, tt.pod)
			got := h.admit(tt.pod)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("envs (-want,+got):\n%s", diff)
			}
			h.p.ReconcileOnce(h.ctx)
			if got := h.pod("p").Annotations[contract.AnnotationAssigned]; got != "true" {
				t.Errorf("%s = %q after Allocate, want true", contract.AnnotationAssigned, got)
			}
		})
	}
}

func env(uuids, idx, pod, container, dev string) map[string]string {
	return map[string]string{contract.EnvVisibleDevices: uuids, contract.EnvIndex: idx, contract.EnvPod: pod,
		contract.EnvContainer: container, contract.EnvDev: dev}
}

func TestAllocateErrors(t *testing.T) {
	placed := st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 2).Allocation(contract.Allocation{"0": {0: 2}}).Obj()
	tests := []struct {
		name     string
		pods     []*v1.Pod
		ids      []string
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "no pod at all", ids: []string{uuid(0) + "::0"}, wantCode: codes.NotFound, wantMsg: "no pod bound to node n1"},
		{
			name: "pod without placement", ids: []string{uuid(0) + "::0"}, wantCode: codes.FailedPrecondition, wantMsg: "no placement annotation",
			pods: []*v1.Pod{st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 1).Obj()},
		},
		{name: "size mismatch", pods: []*v1.Pod{placed}, ids: []string{uuid(0) + "::0"}, wantCode: codes.NotFound, wantMsg: `next container "c" asks 2`},
		{name: "unknown device", pods: []*v1.Pod{placed}, ids: []string{"GPU-nope::0", "x"}, wantCode: codes.InvalidArgument, wantMsg: "unknown device ID"},
		{name: "unit never advertised", pods: []*v1.Pod{placed}, ids: []string{uuid(0) + "::0", uuid(0) + "::99999"}, wantCode: codes.InvalidArgument, wantMsg: "unknown device ID"},
		{name: "unit number not as advertised", pods: []*v1.Pod{placed}, ids: []string{uuid(0) + "::0", uuid(0) + "::01"}, wantCode: codes.InvalidArgument, wantMsg: "unknown device ID"},
		{name: "negative unit", pods: []*v1.Pod{placed}, ids: []string{uuid(0) + "::0", uuid(0) + "::-1"}, wantCode: codes.InvalidArgument, wantMsg: "unknown device ID"},
		{name: "one unit named twice", pods: []*v1.Pod{placed}, ids: []string{uuid(0) + "::0", uuid(0) + "::0"}, wantCode: codes.InvalidArgument, wantMsg: "named twice"},
		{
			name: "placement on a missing GPU", ids: []string{uuid(0) + "::0"}, wantCode: codes.FailedPrecondition, wantMsg: "does not have",
			pods: []*v1.Pod{st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 1).Allocation(contract.Allocation{"0": {9: 1}}).Obj()},
		},
		{
			name: "pod of another node", ids: []string{uuid(0) + "::0"}, wantCode: codes.NotFound, wantMsg: "no pod bound",
			pods: []*v1.Pod{st.MakePod().Name("p").Node("n2").NamedGPUMem("c", 1).Allocation(contract.Allocation{"0": {0: 1}}).Obj()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, noPodResources, mockhost.Options{MemoryBytes: 40 << 30}, tt.pods...)
			_, err := h.p.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tt.ids}}})
			if got := status.Code(err); got != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Allocate error = %v (code %v), want code %v containing %q", err, got, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

// TestAllocateBrokenPodFailsAlone: a pod without a usable placement (bound without one, or
// naming a GPU the node lacks) that kubelet admits first fails its own Allocate; it never gets
// the card of the pod after it, which then gets its own, and later Allocates of the same size
// are not poisoned by it.
func TestAllocateBrokenPodFailsAlone(t *testing.T) {
	placed := func(name string, sec int, g int) *v1.Pod {
		return st.MakePod().Name(name).Node(testNode).Created(t0.Add(time.Duration(sec)*time.Second)).
			NamedGPUMem("c", 2).Allocation(contract.Allocation{"0": {g: 2}}).Obj()
	}
	tests := []struct {
		name    string
		broken  *v1.Pod
		wantMsg string
	}{
		{name: "bound without a placement", wantMsg: "no placement annotation",
			broken: st.MakePod().Name("broken").Node(testNode).Created(t0).NamedGPUMem("c", 2).Obj()},
		{name: "placement on a GPU the node lacks", wantMsg: "which node n1 does not have",
			broken: st.MakePod().Name("broken").Node(testNode).Created(t0).NamedGPUMem("c", 2).Allocation(contract.Allocation{"0": {9: 2}}).Obj()},
		{name: "forged placement: two whole cards for two units", wantMsg: "does not match the container's ask",
			broken: st.MakePod().Name("broken").Node(testNode).Created(t0).NamedGPUMem("c", 2).Allocation(contract.Allocation{"0": {0: 16, 1: 16}}).Obj()},
	}
	modes := map[string]kubeletMode{
		"no PodResources": noPodResources,
		// the kubelet lists none of the pods yet: the relaxed filter considers them all
		"PodResources lists nobody":   listAfterAdmit,
		"PodResources lists them all": listBeforeAdmit,
	}
	for _, tt := range tests {
		for modeName, mode := range modes {
			t.Run(tt.name+"/"+modeName, func(t *testing.T) { testBrokenPodFailsAlone(t, mode, tt.broken, tt.wantMsg, placed) })
		}
	}
}

// testBrokenPodFailsAlone admits broken (created first), then pods b and c placed on GPUs 3 and 5.
func testBrokenPodFailsAlone(t *testing.T, mode kubeletMode, broken *v1.Pod, wantMsg string, placed func(string, int, int) *v1.Pod) {
	pods := []*v1.Pod{broken, placed("b", 1, 3), placed("c", 2, 5)}
	h := newHarness(t, mode, mockhost.Options{MemoryBytes: 40 << 30}, pods...)
	if mode == listBeforeAdmit {
		for _, p := range pods {
			h.kubelet.AddPod(p)
		}
	}
	allocate := func(ids ...string) (map[string]string, error) {
		resp, err := h.p.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		if err != nil {
			return nil, err
		}
		return resp.ContainerResponses[0].Envs, nil
	}
	_, err := allocate(uuid(0)+"::0", uuid(0)+"::1")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "default/broken") || !strings.Contains(err.Error(), wantMsg) {
		t.Fatalf("first Allocate = %v, want FailedPrecondition naming default/broken: %s", err, wantMsg)
	}
	for _, want := range []string{"3", "5"} { // b's card, then c's: nobody gets another's
		got, err := allocate(uuid(0)+"::2", uuid(0)+"::3")
		if err != nil {
			t.Fatalf("Allocate after the broken pod = %v", err)
		}
		if got[contract.EnvIndex] != want {
			t.Errorf("Allocate handed GPU %s, want %s", got[contract.EnvIndex], want)
		}
	}
	if _, err := allocate(uuid(0)+"::4", uuid(0)+"::5"); status.Code(err) != codes.NotFound {
		t.Errorf("Allocate with no pod left = %v, want NotFound", err)
	}
}

// TestAllocateRefusesOverCapacity: whatever the scheduler placed, the plugin fails the
// Allocate of a pod that would make the pods admitted on a card hold more than the card has,
// with an error and a Warning Event on that pod; the next pod that fits is admitted.
func TestAllocateRefusesOverCapacity(t *testing.T) {
	at := func(name string, sec, units int) *v1.Pod {
		return st.MakePod().Name(name).Node(testNode).Created(t0.Add(time.Duration(sec)*time.Second)).
			NamedGPUMem("c", int64(units)).Allocation(contract.Allocation{"0": {0: int64(units)}}).Obj()
	}
	running := at("running", 0, 30)
	running.Annotations[contract.AnnotationAssigned] = "true"
	h := newHarness(t, noPodResources, mockhost.Options{MemoryBytes: 40 << 30}, running, at("bug", 1, 20), at("fits", 2, 10))
	ids := func(lo, n int) []string {
		var out []string
		for i := lo; i < lo+n; i++ {
			out = append(out, fmt.Sprintf("%s::%d", uuid(0), i))
		}
		return out
	}
	_, err := h.p.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids(0, 20)}}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "default/bug") ||
		!strings.Contains(err.Error(), "GPU 0 has 40 units, the pods admitted on it hold 30 and this pod asks 20") {
		t.Fatalf("Allocate of the over-committing pod = %v, want FailedPrecondition naming it", err)
	}
	resp, err := h.p.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids(20, 10)}}})
	if err != nil {
		t.Fatalf("Allocate of the pod that fits = %v", err)
	}
	if got := resp.ContainerResponses[0].Envs[contract.EnvPod]; got != "10" {
		t.Errorf("admitted a pod of %s units, want the 10-unit one", got)
	}
	var events *v1.EventList
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if events, err = h.client.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{}); err == nil && len(events.Items) > 0 {
			break
		}
	}
	if events == nil || len(events.Items) != 1 || events.Items[0].InvolvedObject.Name != "bug" || events.Items[0].Type != v1.EventTypeWarning {
		t.Errorf("events = %+v, want one Warning on pod bug", events)
	}
}

// shape builds pod i of a scenario.
type shape func(i int) *v1.Pod

func equalPods(i int) *v1.Pod {
	return st.MakePod().Name(fmt.Sprintf("p%02d", i)).Node(testNode).Created(t0.Add(time.Duration(i)*time.Second)).
		NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {i % 8: 4}}).Obj()
}

func initPods(i int) *v1.Pod {
	return st.MakePod().Name(fmt.Sprintf("p%02d", i)).Node(testNode).Created(t0.Add(time.Duration(i)*time.Second)).
		NamedInitGPUMem("setup", 2).NamedGPUMem("a", 2).NamedGPUMem("sidecar", 0).NamedGPUMem("b", 3).
		Allocation(contract.Allocation{"init-0": {i % 8: 2}, "0": {i % 8: 2}, "2": {(i + 1) % 8: 3}}).Obj()
}

func sameSecondPods(i int) *v1.Pod {
	return st.MakePod().Name(fmt.Sprintf("p%02d", i)).Node(testNode).Created(t0).
		NamedGPUMem("c", 2).Allocation(contract.Allocation{"0": {(i * 3) % 8: 2}}).Obj()
}

func TestShuffledAdmission(t *testing.T) {
	tests := []struct {
		name           string
		mode           kubeletMode
		shape          shape
		pods           int
		reconcileEach  bool
		creationOrder  bool // admit in creation order (what kubelet does for pods it has)
		wantNoRewrites bool
	}{
		{name: "equal pods, kubelet lists the pod it admits", mode: listBeforeAdmit, shape: equalPods, pods: 16, wantNoRewrites: true},
		{name: "equal pods created in the same second", mode: listBeforeAdmit, shape: sameSecondPods, pods: 12, wantNoRewrites: true},
		{name: "init and multi-container pods, kubelet lists the pod", mode: listBeforeAdmit, shape: initPods, pods: 8, wantNoRewrites: true},
		{name: "equal pods, kubelet lists pods only after admission: guesses corrected", mode: listAfterAdmit, shape: equalPods, pods: 16},
		{name: "same, reconciling between admissions", mode: listAfterAdmit, shape: equalPods, pods: 16, reconcileEach: true},
		{name: "init pods, kubelet lists pods only after admission", mode: listAfterAdmit, shape: initPods, pods: 8},
		{name: "init pods, late listing, reconciling between admissions", mode: listAfterAdmit, shape: initPods, pods: 8, reconcileEach: true},
		{name: "no PodResources, creation-order admission", mode: noPodResources, shape: initPods, pods: 8, creationOrder: true, wantNoRewrites: true},
	}
	for _, tt := range tests {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("%s/seed=%d", tt.name, seed), func(t *testing.T) {
				runShuffled(t, tt.mode, tt.shape, tt.pods, seed, tt.reconcileEach, tt.creationOrder, tt.wantNoRewrites)
			})
		}
	}
}

func runShuffled(t *testing.T, mode kubeletMode, mk shape, n int, seed uint64, reconcileEach, creationOrder, wantNoRewrites bool) {
	var pods []*v1.Pod
	for i := range n {
		pods = append(pods, mk(i))
	}
	h := newHarness(t, mode, mockhost.Options{MemoryBytes: 40 << 30}, pods...)
	before := h.placements(pods)
	order := rand.New(rand.NewPCG(seed, 7)).Perm(n)
	if creationOrder {
		order = order[:0]
		for i := range n {
			order = append(order, i)
		}
	}
	envs := map[string]map[string]map[string]string{}
	for _, i := range order {
		envs[pods[i].Name] = h.admit(pods[i])
		if reconcileEach {
			h.p.ReconcileOnce(h.ctx)
		}
	}
	h.p.ReconcileOnce(h.ctx)
	h.p.ReconcileOnce(h.ctx)
	after := h.placements(pods)
	if diff := cmp.Diff(perCard(before), perCard(after)); diff != "" {
		t.Errorf("per-card totals changed (-before,+after):\n%s", diff)
	}
	if wantNoRewrites {
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("placements rewritten although no guess should be wrong (-before,+after):\n%s", diff)
		}
	}
	for _, pod := range pods {
		fresh := h.pod(pod.Name)
		if got := fresh.Annotations[contract.AnnotationAssigned]; got != "true" {
			t.Errorf("pod %s: %s = %q, want true", pod.Name, contract.AnnotationAssigned, got)
		}
		for key, placement := range after[pod.Name] {
			name := containerName(pod, key)
			if got, want := envs[pod.Name][name][contract.EnvVisibleDevices], h.uuidsOf(placement); got != want {
				t.Errorf("pod %s container %s: env names %s, final annotation names %s", pod.Name, name, got, want)
			}
		}
	}
}

// placements reads every pod's final placement from the API.
func (h *harness) placements(pods []*v1.Pod) map[string]contract.Allocation {
	out := map[string]contract.Allocation{}
	for _, pod := range pods {
		fresh := h.pod(pod.Name)
		req, err := contract.ParseRequest(fresh, &h.p.cfg.names)
		if err != nil {
			h.t.Fatal(err)
		}
		alloc, _, err := contract.AllocationFromPod(fresh, &req)
		if err != nil {
			h.t.Fatal(err)
		}
		out[pod.Name] = alloc
	}
	return out
}

func perCard(all map[string]contract.Allocation) map[int]int64 {
	out := map[int]int64{}
	for _, a := range all {
		for g, u := range a.PerGPU() {
			out[g] += u
		}
	}
	return out
}

func containerName(pod *v1.Pod, key string) string {
	if i, ok := strings.CutPrefix(key, "init-"); ok {
		var n int
		_, _ = fmt.Sscan(i, &n)
		return pod.Spec.InitContainers[n].Name
	}
	var n int
	_, _ = fmt.Sscan(key, &n)
	return pod.Spec.Containers[n].Name
}

// TestAllocateWaitsForThePodTheKubeletAdmits: the kubelet admits pod b, which the plugin's pod
// source does not show yet, while an earlier pod a of the same size waits on the node. The
// plugin waits for b instead of guessing a, so b gets its own card and a keeps its own.
func TestAllocateWaitsForThePodTheKubeletAdmits(t *testing.T) {
	now := time.Now()
	a := st.MakePod().Name("a").Node(testNode).Created(now.Add(-time.Minute)).NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {0: 4}}).Obj()
	b := st.MakePod().Name("b").Node(testNode).Created(now).NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {1: 4}}).Obj()
	h := newHarness(t, listBeforeAdmit, mockhost.Options{GPUs: 2, MemoryBytes: 16 << 30}, a)
	h.p.cfg.resolveWait = 5 * time.Second
	go func() {
		time.Sleep(300 * time.Millisecond) // the pod informer catches up
		if _, err := h.client.CoreV1().Pods("default").Create(h.ctx, b, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	}()
	envB := h.admit(b)
	if got, want := envB["c"][contract.EnvVisibleDevices], h.uuidsOf(map[int]int64{1: 4}); got != want {
		t.Errorf("b got %s, want its own card %s", got, want)
	}
	envA := h.admit(a)
	if got, want := envA["c"][contract.EnvVisibleDevices], h.uuidsOf(map[int]int64{0: 4}); got != want {
		t.Errorf("a got %s, want its own card %s", got, want)
	}
}
