package deviceplugin

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

const testNode = "n1"

// kubeletMode says when the fake kubelet lists a pod in PodResources.
type kubeletMode int

const (
	noPodResources  kubeletMode = iota // no PodResources source at all
	listBeforeAdmit                    // the pod is listed before its Allocate (kubelet's pod manager)
	listAfterAdmit                     // only after: forces guesses that the reconciler must fix
)

// harness is a plugin on a mock host with a fake clientset and a fake kubelet.
type harness struct {
	t       *testing.T
	ctx     context.Context
	p       *Plugin
	client  *k8sfake.Clientset
	kubelet *fake.Kubelet
	mode    kubeletMode
	free    []string // device IDs kubelet has not allocated, in advertised order
	host    *mockhost.Host
	// responses are Allocate's answers by container name, from the last admit.
	responses map[string]*pluginapi.ContainerAllocateResponse
}

func newHarness(t *testing.T, mode kubeletMode, hostOpts mockhost.Options, pods ...*v1.Pod) *harness {
	t.Helper()
	return newHarnessWith(t, mode, hostOpts, nil, pods...)
}

// newHarnessWith is newHarness with more plugin options.
func newHarnessWith(t *testing.T, mode kubeletMode, hostOpts mockhost.Options, extra []Option, pods ...*v1.Pod) *harness {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	h, err := mockhost.New("dgxa100", hostOpts)
	if err != nil {
		t.Fatal(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	objs := []runtime.Object{node}
	for _, p := range pods {
		objs = append(objs, p)
	}
	client := k8sfake.NewClientset(objs...)
	hs := &harness{t: t, ctx: ctx, client: client, kubelet: &fake.Kubelet{}, mode: mode, host: h}
	opts := []Option{WithNodeName(testNode), WithPodSource(fake.ClientPods{Client: client, Node: testNode}),
		WithResolveWait(0), WithHealthCheck(false), WithLogger(logger)}
	if mode != noPodResources {
		opts = append(opts, WithPodResources(hs.kubelet))
	}
	opts = append(opts, extra...)
	hs.p, err = New(nvml.New(h), client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := hs.p.inv.devices()
	for _, d := range devs {
		hs.free = append(hs.free, d.ID)
	}
	return hs
}

// admit plays kubelet admitting pod: GetPreferredAllocation then Allocate per gpu-mem
// container, init containers first. It returns container name → env.
func (h *harness) admit(pod *v1.Pod) map[string]map[string]string {
	h.t.Helper()
	if h.mode == listBeforeAdmit {
		h.kubelet.AddPod(pod)
	}
	envs := map[string]map[string]string{}
	given := map[string][]string{}
	h.responses = map[string]*pluginapi.ContainerAllocateResponse{}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		q, ok := c.Resources.Limits[contract.DefaultResourceName]
		if !ok {
			continue
		}
		ids := h.preferred(int32(q.Value())) //nolint:gosec // G115: test pods ask for a handful of units.
		resp, err := h.p.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		if err != nil {
			h.t.Fatalf("Allocate for %s/%s: %v", pod.Name, c.Name, err)
		}
		envs[c.Name] = resp.ContainerResponses[0].Envs
		h.responses[c.Name] = resp.ContainerResponses[0]
		given[c.Name] = ids
		if h.mode == listBeforeAdmit {
			h.kubelet.SetDevices(pod, c.Name, contract.DefaultResourceName, ids)
		}
	}
	if h.mode == listAfterAdmit {
		h.kubelet.AddPod(pod)
		for name, ids := range given {
			h.kubelet.SetDevices(pod, name, contract.DefaultResourceName, ids)
		}
	}
	return envs
}

// preferred asks the plugin which size IDs to take and removes them from the free list.
func (h *harness) preferred(size int32) []string {
	h.t.Helper()
	resp, err := h.p.GetPreferredAllocation(h.ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: h.free, AllocationSize: size}}})
	if err != nil {
		h.t.Fatal(err)
	}
	ids := resp.ContainerResponses[0].DeviceIDs
	if len(ids) != int(size) {
		h.t.Fatalf("GetPreferredAllocation gave %d IDs, want %d", len(ids), size)
	}
	h.free = slices.DeleteFunc(h.free, func(id string) bool { return slices.Contains(ids, id) })
	return ids
}

// pod reads a pod back from the clientset.
func (h *harness) pod(name string) *v1.Pod {
	h.t.Helper()
	p, err := h.client.CoreV1().Pods("default").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// uuidsOf renders the UUIDs of a placement as NVIDIA_VISIBLE_DEVICES would.
func (h *harness) uuidsOf(placement map[int]int64) string {
	var idx []int
	for g := range placement {
		idx = append(idx, g)
	}
	slices.Sort(idx)
	var out []string
	for _, g := range idx {
		card, _ := h.p.inv.lookup(g)
		out = append(out, card.UUID)
	}
	return strings.Join(out, ",")
}
