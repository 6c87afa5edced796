package usage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

const (
	uuid0 = "GPU-6a5e0000-0000-4000-8000-000000000000"
	uuid1 = "GPU-6a5e0001-0000-4000-8000-000000000001"
	gib   = uint64(1) << 30
)

// fixture is a node of two 16 GiB cards with its pods, processes and recorded events.
type fixture struct {
	host   *mockhost.Host
	pods   *podList
	owners owners
	events *eventLog
	s      *Sampler
}

type podList struct {
	mu   sync.Mutex
	pods []*v1.Pod
}

func (l *podList) NodePods(context.Context) ([]*v1.Pod, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*v1.Pod(nil), l.pods...), nil
}

func (l *podList) set(pods ...*v1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pods = pods
}

// owners maps PIDs to their cgroup's owner; others are not in a pod.
type owners map[uint32]Owner

func (o owners) OwnerOf(pid uint32) (Owner, error) {
	if ow, ok := o[pid]; ok {
		return ow, nil
	}
	return Owner{}, fmt.Errorf("pid %d: %w", pid, ErrNotInPod)
}

type eventLog struct {
	mu  sync.Mutex
	got []string
}

func (l *eventLog) warn(_ context.Context, pod *v1.Pod, reason, message string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, pod.Name+" "+reason+": "+message)
	return nil
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

// gpuPod is a running pod whose one container "main" (runtime ID cid) asks units of gpu-mem
// (none when units is 0).
func gpuPod(name, cid string, units int64) *v1.Pod {
	c := v1.Container{Name: "main"}
	if units > 0 {
		c.Resources.Limits = v1.ResourceList{contract.DefaultResourceName: *resource.NewQuantity(units, resource.DecimalSI)}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{c}},
		Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
			{Name: "main", ContainerID: "containerd://" + cid}}},
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	h, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 2, MemoryBytes: 16 * gib})
	if err != nil {
		t.Fatal(err)
	}
	lib := nvml.New(h)
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{host: h, pods: &podList{}, owners: owners{}, events: &eventLog{}}
	f.s, err = New(Config{NVML: lib, Pods: f.pods, Owners: f.owners, Names: contract.DefaultNames(), Warn: f.events.warn})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSampler: per-card readings, processes attributed to containers by cgroup, a container over
// its ask warned about once, a host process counted outside the pods, metrics as scraped.
func TestSampler(t *testing.T) {
	f := newFixture(t)
	within, over, none := gpuPod("within", "cid-a", 4), gpuPod("over", "cid-b", 2), gpuPod("none", "cid-c", 0)
	f.pods.set(within, over, none)
	f.owners[100] = Owner{PodUID: "uid-within", ContainerID: "cid-a"}
	f.owners[200] = Owner{PodUID: "uid-over", ContainerID: "cid-b"}
	f.owners[201] = Owner{PodUID: "uid-over"} // pod-level cgroup: its only gpu-mem container
	f.owners[400] = Owner{PodUID: "uid-none", ContainerID: "cid-c"}
	f.host.SetUsage(0, 40, []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 3 * gib}, {Pid: 200, UsedGpuMemory: 3 * gib}})
	f.host.SetUsage(1, 5, []gonvml.ProcessInfo{{Pid: 201, UsedGpuMemory: gib}, {Pid: 300, UsedGpuMemory: gib}, {Pid: 400, UsedGpuMemory: gib / 2}})

	snap, err := f.s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Pod, Container string
		Total, Over    uint64
	}
	var got []row
	for _, c := range snap.Containers {
		got = append(got, row{c.Pod, c.Container, c.TotalBytes(), c.OverBytes()})
	}
	want := []row{{"none", "main", gib / 2, gib / 2}, {"over", "main", 4 * gib, 2 * gib}, {"within", "main", 3 * gib, 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	if snap.Cards[1].OutsidePodsBytes != gib {
		t.Errorf("card 1 outside pods = %d, want %d (the host process)", snap.Cards[1].OutsidePodsBytes, gib)
	}
	wantEvents := []string{
		"none GPUMemoryOverRequest: container main uses 512Mi of GPU memory on " + uuid1 + ", more than the 0 it asked (0 of aliyun.com/gpu-mem)",
		"over GPUMemoryOverRequest: container main uses 4Gi of GPU memory on " + uuid0 + ", " + uuid1 + ", more than the 2Gi it asked (2 of aliyun.com/gpu-mem)",
	}
	if diff := cmp.Diff(wantEvents, f.events.list()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	expected := fmt.Sprintf(`
# HELP gpushare_container_gpu_memory_over_request_bytes GPU memory the container uses beyond what it asked, over all its cards (0 when within its ask).
# TYPE gpushare_container_gpu_memory_over_request_bytes gauge
gpushare_container_gpu_memory_over_request_bytes{container="main",namespace="team",pod="none"} %[1]d
gpushare_container_gpu_memory_over_request_bytes{container="main",namespace="team",pod="over"} %[2]d
gpushare_container_gpu_memory_over_request_bytes{container="main",namespace="team",pod="within"} 0
# HELP gpushare_container_gpu_memory_used_bytes GPU memory the container's processes use on the card.
# TYPE gpushare_container_gpu_memory_used_bytes gauge
gpushare_container_gpu_memory_used_bytes{container="main",gpu_uuid="%[4]s",namespace="team",pod="none"} %[1]d
gpushare_container_gpu_memory_used_bytes{container="main",gpu_uuid="%[3]s",namespace="team",pod="over"} %[5]d
gpushare_container_gpu_memory_used_bytes{container="main",gpu_uuid="%[4]s",namespace="team",pod="over"} %[6]d
gpushare_container_gpu_memory_used_bytes{container="main",gpu_uuid="%[3]s",namespace="team",pod="within"} %[5]d
# HELP gpushare_gpu_utilization_ratio Share of the last NVML sample period in which a kernel ran on the card (0-1); absent when the card does not report it.
# TYPE gpushare_gpu_utilization_ratio gauge
gpushare_gpu_utilization_ratio{gpu="0",model="Mock NVIDIA A100-SXM4-40GB",uuid="%[3]s"} 0.4
gpushare_gpu_utilization_ratio{gpu="1",model="Mock NVIDIA A100-SXM4-40GB",uuid="%[4]s"} 0.05
# HELP gpushare_gpu_memory_used_bytes GPU memory in use on the card (NVML), by every process and the driver.
# TYPE gpushare_gpu_memory_used_bytes gauge
gpushare_gpu_memory_used_bytes{gpu="0",model="Mock NVIDIA A100-SXM4-40GB",uuid="%[3]s"} %[7]d
gpushare_gpu_memory_used_bytes{gpu="1",model="Mock NVIDIA A100-SXM4-40GB",uuid="%[4]s"} %[8]d
`, gib/2, 2*gib, uuid0, uuid1, 3*gib, gib, 6*gib, 5*gib/2)
	if err := testutil.CollectAndCompare(f.s, strings.NewReader(expected),
		"gpushare_container_gpu_memory_over_request_bytes", "gpushare_container_gpu_memory_used_bytes",
		"gpushare_gpu_utilization_ratio", "gpushare_gpu_memory_used_bytes"); err != nil {
		t.Error(err)
	}
	if err := testutil.CollectAndCompare(f.s, strings.NewReader(""), "gpushare_no_such_metric"); err != nil {
		t.Error(err)
	}

	// the same state again: no second event
	if _, err := f.s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.events.list()); n != 2 {
		t.Errorf("%d events after a second sample, want still 2", n)
	}
	// pod "over" leaves the node and comes back (same UID): warned again
	f.pods.set(within, none)
	if _, err := f.s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.pods.set(within, over, none)
	if _, err := f.s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.events.list()); n != 3 {
		t.Errorf("%d events after the pod came back, want 3", n)
	}
}

// TestSamplerCardError: a card NVML cannot read is left out and counted; the other still counts,
// and nobody is forgotten on a partial reading.
func TestSamplerCardError(t *testing.T) {
	f := newFixture(t)
	f.pods.set(gpuPod("p", "cid-p", 1))
	f.owners[7] = Owner{PodUID: "uid-p", ContainerID: "cid-p"}
	f.host.SetUsage(1, 0, []gonvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 2 * gib}})
	f.host.Devices[0].(*server.Device).GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		return gonvml.Memory{}, gonvml.ERROR_GPU_IS_LOST
	}
	snap, err := f.s.Sample(context.Background())
	if err == nil || !strings.Contains(err.Error(), "device 0") {
		t.Errorf("error = %v, want one naming device 0", err)
	}
	if len(snap.Cards) != 1 || snap.Cards[0].Device.Index != 1 || len(snap.Containers) != 1 {
		t.Errorf("reading = %+v, want card 1 and the one container", snap)
	}
	wantErrors(t, f.s, 1)
	if n := len(f.events.list()); n != 1 {
		t.Errorf("%d events, want 1 (2Gi used, 1Gi asked)", n)
	}
}

// TestSamplerPodListError: no reading without the pods; the error says so and is counted.
func TestSamplerPodListError(t *testing.T) {
	f := newFixture(t)
	f.s.cfg.Pods = failingLister{}
	if _, err := f.s.Sample(context.Background()); err == nil {
		t.Fatal("Sample succeeded without pods")
	}
	wantErrors(t, f.s, 1)
	if !f.s.Last().Time.IsZero() {
		t.Error("a failed reading replaced the last one")
	}
}

type failingLister struct{}

func (failingLister) NodePods(context.Context) ([]*v1.Pod, error) {
	return nil, errors.New("informer not synced")
}

// wantErrors checks the sampler's error counter as a scrape shows it.
func wantErrors(t *testing.T, s *Sampler, n int) {
	t.Helper()
	want := fmt.Sprintf(`
# HELP gpushare_usage_sample_errors_total GPU usage readings that failed or left a card out.
# TYPE gpushare_usage_sample_errors_total counter
gpushare_usage_sample_errors_total %d
`, n)
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), "gpushare_usage_sample_errors_total"); err != nil {
		t.Error(err)
	}
}

// TestSamplerWithLimits: where the node enforces limits, every gpu-mem container's limit on each
// card of its placement sits beside its use, the mode is reported, and no over-request event is
// recorded (the limit holds the container; usage over the ask is its CUDA context).
func TestSamplerWithLimits(t *testing.T) {
	f := newFixture(t)
	f.s.cfg.MemoryLimit, f.s.cfg.MemoryLimitConfigured = contract.MemoryLimitHAMiCore, contract.MemoryLimitHAMiCore
	one := gpuPod("one", "cid-a", 4)
	one.Annotations = map[string]string{contract.AnnotationAllocation: `{"0":{"1":4}}`}
	two := gpuPod("two", "cid-b", 6)
	two.Annotations = map[string]string{contract.AnnotationAllocation: `{"0":{"0":3,"1":3}}`, contract.DefaultGPUsPerContainer: "2"}
	done := gpuPod("done", "cid-c", 2)
	done.Annotations = map[string]string{contract.AnnotationAllocation: `{"0":{"0":2}}`}
	done.Status.Phase = v1.PodSucceeded
	f.pods.set(one, two, done)
	f.owners[100] = Owner{PodUID: "uid-one", ContainerID: "cid-a"}
	f.host.SetUsage(1, 10, []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 4*gib + gib/2}})
	if _, err := f.s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	expected := fmt.Sprintf(`
# HELP gpushare_container_gpu_memory_limit_bytes GPU memory the container may use on the card, enforced by HAMi-core (absent where the node enforces no limit).
# TYPE gpushare_container_gpu_memory_limit_bytes gauge
gpushare_container_gpu_memory_limit_bytes{container="main",gpu_uuid="%[1]s",namespace="team",pod="one"} %[3]d
gpushare_container_gpu_memory_limit_bytes{container="main",gpu_uuid="%[2]s",namespace="team",pod="two"} %[4]d
gpushare_container_gpu_memory_limit_bytes{container="main",gpu_uuid="%[1]s",namespace="team",pod="two"} %[4]d
# HELP gpushare_container_gpu_memory_used_bytes GPU memory the container's processes use on the card.
# TYPE gpushare_container_gpu_memory_used_bytes gauge
gpushare_container_gpu_memory_used_bytes{container="main",gpu_uuid="%[1]s",namespace="team",pod="one"} %[5]d
# HELP gpushare_memory_enforcement 1 for the node's GPU memory limit mode: mode is what containers get (hami-core, none, or unavailable: asked for but the library is missing or unusable), configured what --memory-limit asked.
# TYPE gpushare_memory_enforcement gauge
gpushare_memory_enforcement{configured="hami-core",mode="hami-core"} 1
`, uuid1, uuid0, 4*gib, 3*gib, 4*gib+gib/2)
	if err := testutil.CollectAndCompare(f.s, strings.NewReader(expected), "gpushare_container_gpu_memory_limit_bytes",
		"gpushare_container_gpu_memory_used_bytes", "gpushare_memory_enforcement"); err != nil {
		t.Error(err)
	}
	if got := f.events.list(); len(got) != 0 {
		t.Errorf("events where limits are enforced: %v", got)
	}
}

// TestSamplerReportsUnavailableLimits: a node asked to enforce that cannot says so, lists no
// limits, and keeps warning about containers over their ask.
func TestSamplerReportsUnavailableLimits(t *testing.T) {
	f := newFixture(t)
	f.s.cfg.MemoryLimit, f.s.cfg.MemoryLimitConfigured = contract.MemoryLimitUnavailable, contract.MemoryLimitHAMiCore
	p := gpuPod("p", "cid-a", 1)
	p.Annotations = map[string]string{contract.AnnotationAllocation: `{"0":{"0":1}}`}
	f.pods.set(p)
	f.owners[100] = Owner{PodUID: "uid-p", ContainerID: "cid-a"}
	f.host.SetUsage(0, 10, []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 3 * gib}})
	if _, err := f.s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	expected := `
# HELP gpushare_memory_enforcement 1 for the node's GPU memory limit mode: mode is what containers get (hami-core, none, or unavailable: asked for but the library is missing or unusable), configured what --memory-limit asked.
# TYPE gpushare_memory_enforcement gauge
gpushare_memory_enforcement{configured="hami-core",mode="unavailable"} 1
`
	if err := testutil.CollectAndCompare(f.s, strings.NewReader(expected), "gpushare_memory_enforcement", "gpushare_container_gpu_memory_limit_bytes"); err != nil {
		t.Error(err)
	}
	if got := f.events.list(); len(got) != 1 {
		t.Errorf("events = %v, want the over-request warning", got)
	}
}
