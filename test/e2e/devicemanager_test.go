package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// admitted is the kubelet's pod list in the device-manager test: the pods admitted so far
// plus the one being admitted (kubelet adds a pod to its pod manager before admitting it).
type admitted struct {
	mu   sync.Mutex
	pods []*v1.Pod
	m    *devicemanager.ManagerImpl
}

func (a *admitted) add(p *v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pods = append(a.pods, p)
}

func (a *admitted) active() []*v1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*v1.Pod(nil), a.pods...)
}

// List is the kubelet's PodResources List, built as the kubelet builds it: from its pods and
// the device manager's GetDevices.
func (a *admitted) List(context.Context) ([]*podresourcesv1.PodResources, error) {
	var out []*podresourcesv1.PodResources
	for _, p := range a.active() {
		pr := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace}
		for _, c := range p.Spec.Containers {
			cr := &podresourcesv1.ContainerResources{Name: c.Name}
			for res, devs := range a.m.GetDevices(string(p.UID), c.Name) {
				ids := make([]string, 0, len(devs))
				for id := range devs {
					ids = append(ids, id)
				}
				cr.Devices = append(cr.Devices, &podresourcesv1.ContainerDevices{ResourceName: res, DeviceIds: ids})
			}
			pr.Containers = append(pr.Containers, cr)
		}
		out = append(out, pr)
	}
	return out, nil
}

type sourcesReady struct{}

func (sourcesReady) AddSource(string) {}
func (sourcesReady) AllReady() bool   { return true }

// TestKubeletDeviceManager is the device plugin's contract test against the kubelet's own
// device-manager code (k8s.io/kubernetes/pkg/kubelet/cm/devicemanager), in process: the real
// scheduler and extender bind 8 equal pods (4 GiB each) over two 16 GiB cards of node dm-node,
// then the device manager admits them in a shuffled order (Allocate, as the kubelet does at
// admission) through share-plugin's gRPC socket. Every container's env must name the card its
// pod's final annotations name, and the per-card totals must not change.
func TestKubeletDeviceManager(t *testing.T) {
	const node, n = "dm-node", 8
	e, kubelet, cards := newDeviceManagerEnv(t, node)

	for i := range n {
		e.create(e.gpuPod(fmt.Sprintf("eq-%d", i), 4))
	}
	e.waitAllBound(n, time.Minute)
	before, _, err := e.apiUsage()
	if err != nil {
		t.Fatal(err)
	}
	envs := e.admitShuffled(kubelet)
	e.waitAllAssigned()
	after, final, err := e.apiUsage()
	if err != nil {
		t.Fatal(err)
	}
	if before.String() != after.String() {
		t.Errorf("per-card totals changed\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for _, pod := range final {
		idx, _ := strconv.Atoi(pod.Annotations[contract.AnnotationIndex])
		env := envs[pod.Name]
		t.Logf("%s: annotation GPU%d, env %s=%s %s=%s", pod.Name, idx,
			contract.EnvVisibleDevices, env[contract.EnvVisibleDevices], contract.EnvContainer, env[contract.EnvContainer])
		if want := uuidOf(t, cards[node], idx); env[contract.EnvVisibleDevices] != want {
			t.Errorf("%s: env names %s, its annotations name GPU%d (%s)", pod.Name, env[contract.EnvVisibleDevices], idx, want)
		}
		if env[contract.EnvContainer] != "4" {
			t.Errorf("%s: %s=%q, want 4", pod.Name, contract.EnvContainer, env[contract.EnvContainer])
		}
	}
	e.checkConsistent(cards)
}

// newDeviceManagerEnv is a cluster with one node of 2 x 16 GiB mocked cards whose share-plugin
// has registered with the kubelet's device manager, run in process (root: DevicePluginDir).
func newDeviceManagerEnv(t *testing.T, node string) (*env, *admitted, map[string][]contract.GPU) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("\n" + banner + "\nSKIP " + t.Name() + ": the device manager's socket folder " +
			framework.DevicePluginDir + " needs root\n" + banner)
	}
	unlock, err := framework.LockDevicePluginDir(10*time.Minute, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	e := newEnv(t)
	mock := mockhost.Options{GPUs: 2, MemoryBytes: 16 << 30}
	cards := map[string][]contract.GPU{node: mockCards(t, mock)}
	e.nodes(cards)
	kubelet := e.startDeviceManager()
	e.startPlugin(node, mock, kubelet)
	e.waitCapacity(kubelet.m, 32)
	return e, kubelet, cards
}

// startDeviceManager starts the kubelet's device manager on DevicePluginDir.
func (e *env) startDeviceManager() *admitted {
	e.t.Helper()
	logger := klog.Background()
	m, err := devicemanager.NewManagerImpl(logger, nil, topologymanager.NewFakeManager(logger))
	if err != nil {
		e.t.Fatal(err)
	}
	kubelet := &admitted{m: m}
	if err := m.Start(logger, kubelet.active, sourcesReady{}, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = m.Stop(logger) })
	return kubelet
}

// startPlugin runs share-plugin in process on a mock host; it registers with the device
// manager (after its Start, which wipes the folder's sockets) and reads PodResources from it.
func (e *env) startPlugin(node string, mock mockhost.Options, kubelet *admitted) {
	e.t.Helper()
	host, err := mockhost.New("dgxa100", mock)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := deviceplugin.New(nvml.New(host), e.c.Client,
		deviceplugin.WithNodeName(node),
		deviceplugin.WithKubeletDir(pluginapi.DevicePluginPath),
		deviceplugin.WithPodResources(kubelet),
		deviceplugin.WithHealthCheck(false))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	e.t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			e.t.Logf("device plugin Run ended with: %v", err)
		}
	})
}

// admitShuffled admits every pod, in a random order, as the kubelet does: add it to the pod
// list, Allocate its container, read the container's run options. It returns each pod's env.
func (e *env) admitShuffled(kubelet *admitted) map[string]map[string]string {
	e.t.Helper()
	pods, err := e.c.Client.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	order := rand.Perm(len(pods.Items)) //nolint:gosec // G404: a fresh admission order per run, nothing secret.
	envs := map[string]map[string]string{}
	for _, i := range order {
		pod := &pods.Items[i]
		envs[pod.Name] = e.admit(kubelet, pod)
	}
	e.t.Logf("admitted in order %v", order)
	return envs
}

// waitAllAssigned waits until the plugin has confirmed (or corrected) every handout through
// PodResources and marked every pod assigned.
func (e *env) waitAllAssigned() {
	e.t.Helper()
	err := poll(e.ctx, time.Minute, func() (bool, error) {
		l, err := e.c.Client.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range l.Items {
			if p.Annotations[contract.AnnotationAssigned] != "true" {
				return false, fmt.Errorf("%s not assigned yet", p.Name)
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// mockCards are the cards of a mock host as the plugin publishes them (read from a second
// instance of the same host, whose UUIDs are the same).
func mockCards(t *testing.T, o mockhost.Options) []contract.GPU {
	t.Helper()
	host, err := mockhost.New("dgxa100", o)
	if err != nil {
		t.Fatal(err)
	}
	nv := nvml.New(host)
	if err := nv.Init(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nv.Shutdown() }()
	count, err := nv.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	var gpus []contract.GPU
	for i := range count {
		d, err := nv.Device(i)
		if err != nil {
			t.Fatal(err)
		}
		gpus = append(gpus, contract.GPU{Index: d.Index, UUID: d.UUID, Model: d.Model, Units: int64((d.MemoryBytes - d.ReservedBytes) >> 30), Healthy: true})
	}
	return gpus
}

// waitCapacity waits until the device manager has the plugin's devices.
func (e *env) waitCapacity(m *devicemanager.ManagerImpl, units int64) {
	e.t.Helper()
	err := poll(e.ctx, time.Minute, func() (bool, error) {
		capacity, _, _ := m.GetCapacity(klog.Background())
		q := capacity[contract.DefaultResourceName]
		return q.Value() == units, fmt.Errorf("capacity %v", capacity)
	})
	if err != nil {
		e.t.Fatalf("plugin never registered its %d units with the device manager: %v", units, err)
	}
}

// remove drops a pod the kubelet refused at admission from its pod list.
func (a *admitted) remove(p *v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.pods {
		if a.pods[i].UID == p.UID {
			a.pods = append(a.pods[:i], a.pods[i+1:]...)
			return
		}
	}
}

// TestKubeletDeviceManagerRefusesBadPlacements: pods bound past the extender reach the real
// device manager's Allocate: one without a placement, one whose placement names a GPU the node
// does not have, one whose placement would put a card over capacity. Each fails its own
// admission (the over-capacity one with a Warning Event), none takes another pod's card, and a
// pod of the same size admitted after them gets its own card.
func TestKubeletDeviceManagerRefusesBadPlacements(t *testing.T) {
	const node = "dm-node"
	e, kubelet, cards := newDeviceManagerEnv(t, node)

	for i := range 5 {
		e.create(e.gpuPod(fmt.Sprintf("good-%d", i), 4))
	}
	e.waitAllBound(5, time.Minute)
	good := map[string]*v1.Pod{}
	for i := range 5 {
		good[fmt.Sprintf("good-%d", i)] = e.waitBound(fmt.Sprintf("good-%d", i), time.Second)
	}
	used := map[int]int64{}
	for i := range 4 {
		e.admitOK(kubelet, cards[node], good[fmt.Sprintf("good-%d", i)])
		idx, _ := strconv.Atoi(good[fmt.Sprintf("good-%d", i)].Annotations[contract.AnnotationIndex])
		used[idx] += 4
	}
	busiest := 0
	if used[1] > used[0] {
		busiest = 1
	}
	rogue := func(name string, units int64, gpu int) *v1.Pod {
		pod := e.gpuPod(name, units)
		pod.Spec.NodeName = node // bound past the scheduler and the extender
		if gpu >= 0 {
			pod.Annotations = map[string]string{
				contract.AnnotationIndex: strconv.Itoa(gpu), contract.AnnotationPod: strconv.FormatInt(units, 10),
				contract.AnnotationDev: "16", contract.AnnotationAssigned: "false",
				contract.AnnotationAssumeTime: strconv.FormatInt(time.Now().UnixNano(), 10),
				contract.AnnotationAllocation: fmt.Sprintf(`{"0":{"%d":%d}}`, gpu, units),
			}
		}
		created, err := e.c.Client.CoreV1().Pods("default").Create(e.ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	for _, bad := range []*v1.Pod{
		rogue("unplaced", 4, -1),
		rogue("missing-gpu", 4, 7),
		rogue("overfull", 16-used[busiest]+4, busiest),
	} {
		kubelet.add(bad)
		err := kubelet.m.Allocate(e.ctx, bad, &bad.Spec.Containers[0], lifecycle.AddOperation)
		kubelet.remove(bad)
		if err == nil {
			t.Errorf("%s was admitted", bad.Name)
			continue
		}
		t.Logf("%s refused: %v", bad.Name, err)
	}
	if err := poll(e.ctx, 10*time.Second, func() (bool, error) {
		return strings.Contains(e.events("overfull"), "GPUShareAllocateFailed"), nil
	}); err != nil {
		t.Errorf("no GPUShareAllocateFailed Event on the pod refused for capacity; events:\n%s", e.events("overfull"))
	}
	e.admitOK(kubelet, cards[node], good["good-4"])
	for _, name := range []string{"unplaced", "missing-gpu", "overfull"} {
		zero := int64(0)
		if err := e.c.Client.CoreV1().Pods("default").Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitAllAssigned()
	e.checkConsistent(cards)
}

// admit admits pod as the kubelet does (add it to the pod list, Allocate its container, read
// the container's run options) and returns the container's env.
func (e *env) admit(kubelet *admitted, pod *v1.Pod) map[string]string {
	e.t.Helper()
	kubelet.add(pod)
	c := &pod.Spec.Containers[0]
	if err := kubelet.m.Allocate(e.ctx, pod, c, lifecycle.AddOperation); err != nil {
		e.t.Fatalf("admit %s: %v", pod.Name, err)
	}
	opts, err := kubelet.m.GetDeviceRunContainerOptions(e.ctx, pod, c)
	if err != nil {
		e.t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range opts.Envs {
		env[kv.Name] = kv.Value
	}
	return env
}

// admitOK admits pod and checks that its container got the card its annotations name.
func (e *env) admitOK(kubelet *admitted, cards []contract.GPU, pod *v1.Pod) {
	e.t.Helper()
	env := e.admit(kubelet, pod)
	idx, _ := strconv.Atoi(pod.Annotations[contract.AnnotationIndex])
	if want := uuidOf(e.t, cards, idx); env[contract.EnvVisibleDevices] != want {
		e.t.Errorf("%s: env names %s, its annotations name GPU%d (%s)", pod.Name, env[contract.EnvVisibleDevices], idx, want)
	}
}
