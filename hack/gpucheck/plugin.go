package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// The fake cluster the plugin runs in.
const (
	checkNode      = "gpucheck-node"
	checkNamespace = "gpucheck"
	// checkCard is the NVML index of the card both pods are placed on.
	checkCard = 0
)

// podAsk is one pod of the check: one container asking units of card checkCard.
type podAsk struct {
	Pod, Container string
	Units          int64
}

// admitted is one container as kubelet starts it: Allocate's answer for it.
type admitted struct {
	Pod       *v1.Pod
	Container string
	// ContainerID is the runtime ID the check gives it in the pod's status (the usage sampler
	// names containers by it).
	ContainerID string
	// LimitBytes is what it asked: its units times the unit.
	LimitBytes int64
	Response   *pluginapi.ContainerAllocateResponse
	// Via names what handed the container its card, for the report: "" for device-plugin
	// mode's Allocate, viaPrepare for DRA mode (dra.go).
	Via string
}

// via names what handed a its card in the report.
func (a admitted) via() string {
	if a.Via == "" {
		return "Allocate"
	}
	return a.Via
}

// modePrefix starts the report's rows about adm as a whole: "DRA mode: " for DRA mode's
// containers, nothing for device-plugin mode's.
func modePrefix(adm []admitted) string {
	if len(adm) > 0 && adm[0].Via == viaPrepare {
		return "DRA mode: "
	}
	return ""
}

// fakeNode is the share-plugin on a node without Kubernetes: the pods in a fake clientset, a
// fake kubelet playing PodResources, the plugin's gRPC methods called directly.
type fakeNode struct {
	client  *k8sfake.Clientset
	kubelet *fake.Kubelet
	plugin  *deviceplugin.Plugin
	names   contract.Names
	pods    []*v1.Pod
	// free are the device IDs kubelet has not allocated, in advertised order.
	free []string
}

// newFakeNode binds a pod per ask to the node, each placed on card checkCard as the extender
// would annotate it, and builds the plugin over nv (initialized) with opts.
func newFakeNode(ctx context.Context, nv nvml.Interface, asks []podAsk, opts ...deviceplugin.Option) (*fakeNode, error) {
	names := contract.DefaultNames()
	card, err := nv.Device(checkCard)
	if err != nil {
		return nil, fmt.Errorf("card %d: %w", checkCard, err)
	}
	n := &fakeNode{kubelet: &fake.Kubelet{}, names: names}
	objs := []runtime.Object{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: checkNode}}}
	created := time.Now().Add(-time.Minute)
	for i, a := range asks {
		pod, err := makePod(a, &names, names.UnitsOf(card.MemoryBytes-card.ReservedBytes), created.Add(time.Duration(i)*time.Second))
		if err != nil {
			return nil, err
		}
		n.pods = append(n.pods, pod)
		objs = append(objs, pod)
	}
	n.client = k8sfake.NewClientset(objs...)
	base := []deviceplugin.Option{deviceplugin.WithNodeName(checkNode),
		deviceplugin.WithPodSource(fake.ClientPods{Client: n.client, Node: checkNode}), deviceplugin.WithPodResources(n.kubelet),
		deviceplugin.WithResolveWait(0), deviceplugin.WithHealthCheck(false), deviceplugin.WithLogger(klog.FromContext(ctx))}
	if n.plugin, err = deviceplugin.New(nv, n.client, append(base, opts...)...); err != nil {
		return nil, fmt.Errorf("share-plugin: %w", err)
	}
	if n.free, err = advertised(ctx, n.plugin); err != nil {
		return nil, err
	}
	return n, nil
}

// makePod is a pod bound to the node with one container asking a.Units, placed on card
// checkCard with the extender's annotations (docs/contract.md).
func makePod(a podAsk, names *contract.Names, cardUnits int64, created time.Time) (*v1.Pod, error) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: a.Pod, Namespace: checkNamespace, UID: types.UID("gpucheck-" + a.Pod),
			CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.PodSpec{NodeName: checkNode, Containers: []v1.Container{{Name: a.Container, Image: "gpucheck",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{names.Resource: *resource.NewQuantity(a.Units, resource.DecimalSI)}}}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	req, err := contract.ParseRequest(pod, names)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", a.Pod, err)
	}
	alloc := contract.Allocation{req.Containers[0].Key: {checkCard: a.Units}}
	ann, err := contract.PlacementAnnotations(alloc, &req, map[int]int64{checkCard: cardUnits}, created)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", a.Pod, err)
	}
	pod.Annotations = ann
	return pod, nil
}

// firstList is the kubelet's end of ListAndWatch: it keeps the first device list and ends
// the stream.
type firstList struct {
	grpc.ServerStream
	ctx     context.Context
	cancel  context.CancelFunc
	devices []*pluginapi.Device
}

// Context is the stream's context, cancelled after the first list.
func (s *firstList) Context() context.Context { return s.ctx }

// Send keeps the first list and ends the stream.
func (s *firstList) Send(r *pluginapi.ListAndWatchResponse) error {
	if s.devices == nil {
		s.devices = r.GetDevices()
	}
	s.cancel()
	return nil
}

// advertised returns the healthy device IDs the plugin advertises, as kubelet reads them.
func advertised(ctx context.Context, p *deviceplugin.Plugin) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &firstList{ctx: ctx, cancel: cancel}
	if err := p.ListAndWatch(&pluginapi.Empty{}, s); err != nil {
		return nil, fmt.Errorf("ListAndWatch: %w", err)
	}
	var ids []string
	for _, d := range s.devices {
		if d.GetHealth() == pluginapi.Healthy {
			ids = append(ids, d.GetID())
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("the plugin advertised no healthy device")
	}
	return ids, nil
}

// admitAll plays kubelet admitting every pod in creation order: GetPreferredAllocation, then
// Allocate, for its container; then it marks the pod running with a container ID.
func (n *fakeNode) admitAll(ctx context.Context) ([]admitted, error) {
	var out []admitted
	for i, pod := range n.pods {
		a, err := n.admit(ctx, pod, fmt.Sprintf("%064x", i+1))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// admit admits the pod's one container; containerID is the runtime ID it gets.
func (n *fakeNode) admit(ctx context.Context, pod *v1.Pod, containerID string) (admitted, error) {
	c := pod.Spec.Containers[0]
	q := c.Resources.Limits[n.names.Resource]
	n.kubelet.AddPod(pod)
	ids, err := n.preferred(ctx, int32(q.Value())) //nolint:gosec // G115: a handful of units
	if err != nil {
		return admitted{}, err
	}
	resp, err := n.plugin.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return admitted{}, fmt.Errorf("allocate for %s/%s: %w", pod.Name, c.Name, err)
	}
	n.kubelet.SetDevices(pod, c.Name, string(n.names.Resource), ids)
	if err := n.markRunning(ctx, pod, c.Name, containerID); err != nil {
		return admitted{}, err
	}
	return admitted{Pod: pod, Container: c.Name, ContainerID: containerID, LimitBytes: q.Value() * n.names.UnitBytes(),
		Response: resp.GetContainerResponses()[0]}, nil
}

// preferred asks the plugin which size device IDs to take, as kubelet does, and takes them.
func (n *fakeNode) preferred(ctx context.Context, size int32) ([]string, error) {
	resp, err := n.plugin.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: n.free, AllocationSize: size}}})
	if err != nil {
		return nil, fmt.Errorf("GetPreferredAllocation: %w", err)
	}
	ids := resp.GetContainerResponses()[0].GetDeviceIDs()
	if len(ids) != int(size) {
		return nil, fmt.Errorf("GetPreferredAllocation gave %d device IDs, want %d", len(ids), size)
	}
	n.free = slices.DeleteFunc(n.free, func(id string) bool { return slices.Contains(ids, id) })
	return ids, nil
}

// markRunning writes the pod's status as kubelet would once its container started.
func (n *fakeNode) markRunning(ctx context.Context, pod *v1.Pod, container, containerID string) error {
	cur, err := n.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	cur.Status.Phase = v1.PodRunning
	cur.Status.ContainerStatuses = []v1.ContainerStatus{{Name: container, ContainerID: "gpucheck://" + containerID, Ready: true}}
	if _, err := n.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pod %s status: %w", pod.Name, err)
	}
	return nil
}

// podLister is the plugin's pod source, for the usage sampler.
func (n *fakeNode) podLister() fake.ClientPods {
	return fake.ClientPods{Client: n.client, Node: checkNode}
}
