package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// topologyKubelet is the kubelet configuration of TestTopology: CPU 0 reserved, the others
// handed out whole to Guaranteed containers, and every container's CPUs and devices on one
// NUMA node or not admitted.
const topologyKubelet = `cpuManagerPolicy: static
reservedSystemCPUs: "0"
topologyManagerPolicy: single-numa-node
topologyManagerScope: container
`

// TestTopology: the real kubelet's device manager, CPU manager (static) and Topology Manager
// (single-numa-node) agree with share-plugin on NUMA nodes. This machine has one NUMA node, so
// the kubelet alone is shown two (framework.RealNodeOptions.TwoNUMANodes: node 0 = CPU 0,
// which is reserved; node 1 = the other CPUs); the plugin's two mocked cards are GPU0 on node 0
// and GPU1 on node 1, joined by NVLink (NV12).
//
//  1. The inventory annotation carries the cards' NUMA nodes and links, and the kubelet's
//     devices (PodResources GetAllocatableResources) carry their cards' NUMA nodes.
//  2. pinned: a Guaranteed pod (1 CPU) placed on GPU1. Its CPU can only be on node 1, so the
//     Topology Manager keeps its devices to node 1; GetPreferredAllocation names GPU1's units
//     there, kubelet records them, its CPU is on node 1 and its env names GPU1: all agree.
//  3. unpinned: a BestEffort pod (no exclusive CPUs) placed on GPU1 too. The Topology Manager
//     picks the narrowest, lowest NUMA node with room for its devices, node 0, and offers only
//     node 0's units: no answer of the plugin can name GPU1 there (the kubelet asks no device
//     plugin which node to choose). The container still gets its placement's card (the env
//     names GPU1, as the extender's accounting has it), and the plugin says so with a
//     GPUShareTopologyMismatch Warning event. The extender cannot foresee the kubelet's choice
//     (it depends on the node's free CPUs and the kubelet's device accounting); see
//     docs/deviceplugin.md, "Topology".
func TestTopology(t *testing.T) {
	e, node, gpus := startRealNodeWith(t, framework.RealNodeOptions{KubeletConfig: topologyKubelet, TwoNUMANodes: true})
	for _, g := range gpus {
		t.Logf("node %s: GPU%d on NUMA node %s, links %q", framework.RealNodeName, g.Index, numaOf(g), g.Links)
	}
	checkPublishedTopology(t, gpus)
	pr := podResourcesClient(t, e.ctx, node.PodResourcesSocket())
	checkAllocatableNUMA(t, e.ctx, pr, gpus)

	pinned := topologyPod(t, "pinned", gpus, 1, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")}, nil)
	e.create(pinned)
	e.waitRunning("pinned", 2*time.Minute)
	got := kubeletView(t, e.ctx, pr, "pinned", gpus)
	t.Logf("pinned: kubelet gave %v (NUMA %v), CPUs %v", got.cards, got.numa, got.cpus)
	if !slices.Equal(got.cards, []int{1}) || !slices.Equal(got.numa, []int64{1}) {
		t.Errorf("pinned: kubelet gave units of GPUs %v on NUMA nodes %v, want GPU1 on node 1", got.cards, got.numa)
	}
	if len(got.cpus) != 1 || got.cpus[0] == 0 {
		t.Errorf("pinned: CPUs %v, want one exclusive CPU of NUMA node 1 (not CPU 0)", got.cpus)
	}
	if env := e.containerEnv("pinned"); env[contract.EnvVisibleDevices] != uuidOf(t, gpus, 1) {
		t.Errorf("pinned: %s=%q, want GPU1 %s", contract.EnvVisibleDevices, env[contract.EnvVisibleDevices], uuidOf(t, gpus, 1))
	}

	unpinned := topologyPod(t, "unpinned", gpus, 1, nil, nil) // BestEffort: the pinned pod holds the node's one allocatable CPU
	e.create(unpinned)
	e.waitRunning("unpinned", 2*time.Minute)
	got = kubeletView(t, e.ctx, pr, "unpinned", gpus)
	t.Logf("unpinned: kubelet gave %v (NUMA %v)", got.cards, got.numa)
	if env := e.containerEnv("unpinned"); env[contract.EnvVisibleDevices] != uuidOf(t, gpus, 1) {
		t.Errorf("unpinned: %s=%q, want its placement's GPU1 %s", contract.EnvVisibleDevices, env[contract.EnvVisibleDevices], uuidOf(t, gpus, 1))
	}
	if !slices.Equal(got.numa, []int64{0}) {
		t.Fatalf("unpinned: kubelet aligned its devices to NUMA nodes %v; this test expects the Topology Manager's node 0", got.numa)
	}
	if err := poll(e.ctx, 30*time.Second, func() (bool, error) {
		return strings.Contains(e.events("unpinned"), deviceplugin.ReasonTopologyMismatch), nil
	}); err != nil {
		t.Errorf("unpinned: no %s event; events:\n%s", deviceplugin.ReasonTopologyMismatch, e.events("unpinned"))
	}
	if ev := e.events("pinned"); strings.Contains(ev, deviceplugin.ReasonTopologyMismatch) {
		t.Errorf("pinned: a %s event although all agree:\n%s", deviceplugin.ReasonTopologyMismatch, ev)
	}
}

// checkPublishedTopology checks the inventory annotation: GPU0 on NUMA node 0, GPU1 on node 1,
// joined by NVLink.
func checkPublishedTopology(t *testing.T, gpus []contract.GPU) {
	t.Helper()
	top, err := contract.TopologyOf(gpus)
	if err != nil || top == nil || len(gpus) != 2 {
		t.Fatalf("inventory %+v: TopologyOf() = %v, %v; want a matrix over two cards", gpus, top, err)
	}
	for i, g := range gpus {
		if g.NUMA == nil || *g.NUMA != i {
			t.Errorf("GPU%d: NUMA node %v, want %d", g.Index, g.NUMA, i)
		}
	}
	if l := top.Link(0, 1); l.NVLinks() == 0 {
		t.Errorf("GPU0-GPU1 joined by %v, want NVLink", l)
	}
}

// numaOf renders a card's NUMA node, "unknown" when it has none.
func numaOf(g contract.GPU) string {
	if g.NUMA == nil {
		return "unknown"
	}
	return fmt.Sprint(*g.NUMA)
}

// podResourcesClient connects to the kubelet's PodResources socket with the kubelet's own
// client helper.
func podResourcesClient(t *testing.T, ctx context.Context, sock string) podresourcesv1.PodResourcesListerClient {
	t.Helper()
	client, conn, err := podresources.GetV1Client(ctx, "unix://"+sock, 10*time.Second, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return client
}

// checkAllocatableNUMA checks that every gpu-mem device the kubelet holds carries its card's
// NUMA node, as the plugin advertised it.
func checkAllocatableNUMA(t *testing.T, ctx context.Context, pr podresourcesv1.PodResourcesListerClient, gpus []contract.GPU) {
	t.Helper()
	var resp *podresourcesv1.AllocatableResourcesResponse
	err := poll(ctx, time.Minute, func() (bool, error) {
		var err error
		resp, err = pr.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
		return err == nil && len(resp.GetDevices()) > 0, err
	})
	if err != nil {
		t.Fatalf("GetAllocatableResources: %v", err)
	}
	perCard := map[string]int{}
	for _, d := range resp.GetDevices() {
		if d.GetResourceName() != contract.DefaultResourceName {
			continue
		}
		for _, id := range d.GetDeviceIds() {
			card := cardOfID(gpus, id)
			perCard[fmt.Sprintf("GPU%d@%v", card, nodesOf(d.GetTopology()))]++
		}
	}
	want := map[string]int{"GPU0@[0]": int(gpus[0].Units), "GPU1@[1]": int(gpus[1].Units)}
	if fmt.Sprint(perCard) != fmt.Sprint(want) {
		t.Errorf("kubelet's gpu-mem devices by card@NUMA nodes %v, want %v", perCard, want)
	}
}

// topologyPod is a pod bound to the real node past the scheduler, with one container asking
// units of gpu-mem (and limits, requests) placed on card gpu as the extender would annotate it.
func topologyPod(t *testing.T, name string, gpus []contract.GPU, gpu int, limits, requests v1.ResourceList) *v1.Pod {
	t.Helper()
	const units = 4
	l := v1.ResourceList{contract.DefaultResourceName: *resource.NewQuantity(units, resource.DecimalSI)}
	for k, v := range limits {
		l[k] = v
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: framework.RealNodeName, HostNetwork: true, AutomountServiceAccountToken: new(bool),
			Containers: []v1.Container{{
				Name: "main", Image: framework.LocalImage, ImagePullPolicy: v1.PullNever,
				Command:   []string{"sh", "-c", "env | grep -E '^(NVIDIA_VISIBLE_DEVICES|ALIYUN_COM_GPU_MEM_[A-Z]+)=' | sort; sleep 3600"},
				Resources: v1.ResourceRequirements{Limits: l, Requests: requests},
			}},
		},
	}
	names := contract.DefaultNames()
	req, err := contract.ParseRequest(pod, &names)
	if err != nil {
		t.Fatal(err)
	}
	cards := map[int]int64{}
	for _, g := range gpus {
		cards[g.Index] = g.Units
	}
	if pod.Annotations, err = contract.PlacementAnnotations(contract.Allocation{"0": {gpu: units}}, &req, cards, time.Now()); err != nil {
		t.Fatal(err)
	}
	return pod
}

// kubeletRecord is what the kubelet's PodResources says of a pod's container "main".
type kubeletRecord struct {
	cards []int   // the cards of its gpu-mem device IDs, sorted
	numa  []int64 // the NUMA nodes those devices carry, sorted
	cpus  []int64 // its exclusive CPUs (none when it shares the pool)
}

// kubeletView reads pod's record from PodResources List, waiting for its devices.
func kubeletView(t *testing.T, ctx context.Context, pr podresourcesv1.PodResourcesListerClient, pod string, gpus []contract.GPU) kubeletRecord {
	t.Helper()
	var rec kubeletRecord
	err := poll(ctx, 30*time.Second, func() (bool, error) {
		list, err := pr.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			return false, err
		}
		for _, p := range list.GetPodResources() {
			for _, c := range p.GetContainers() {
				if p.GetName() == pod && c.GetName() == "main" {
					rec = recordOf(c, gpus)
					return len(rec.cards) > 0, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("PodResources never listed %s's devices: %v", pod, err)
	}
	return rec
}

// recordOf reads a container's gpu-mem devices (a device ID names its card's UUID) and CPUs.
func recordOf(c *podresourcesv1.ContainerResources, gpus []contract.GPU) kubeletRecord {
	var rec kubeletRecord
	for _, d := range c.GetDevices() {
		if d.GetResourceName() != contract.DefaultResourceName {
			continue
		}
		for _, id := range d.GetDeviceIds() {
			card := cardOfID(gpus, id)
			if !slices.Contains(rec.cards, card) {
				rec.cards = append(rec.cards, card)
			}
		}
		for _, n := range nodesOf(d.GetTopology()) {
			if !slices.Contains(rec.numa, n) {
				rec.numa = append(rec.numa, n)
			}
		}
	}
	rec.cpus = c.GetCpuIds()
	slices.Sort(rec.cards)
	slices.Sort(rec.numa)
	return rec
}

// cardOfID is the index of the card a device ID names, by its UUID; -1 when none.
func cardOfID(gpus []contract.GPU, id string) int {
	uuid, _, _ := strings.Cut(id, "::")
	for _, g := range gpus {
		if g.UUID == uuid {
			return g.Index
		}
	}
	return -1
}

// nodesOf lists a device's NUMA nodes.
func nodesOf(t *podresourcesv1.TopologyInfo) []int64 {
	var out []int64
	for _, n := range t.GetNodes() {
		out = append(out, n.GetID())
	}
	return out
}
