package deviceplugin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// BenchmarkAllocate measures Allocate with 100 equal pods bound to the node, admitted in
// shuffled order, through the production pod source (an informer) and optionally the kubelet's
// PodResources view. It reports the p50 and p99 latency of one Allocate.
func BenchmarkAllocate(b *testing.B) {
	const n = 100
	for _, withKubelet := range []bool{false, true} {
		b.Run(fmt.Sprintf("pods=%d/podresources=%v", n, withKubelet), func(b *testing.B) {
			benchAllocate(b, n, withKubelet)
		})
	}
}

func benchAllocate(b *testing.B, n int, withKubelet bool) {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().V(10)))
	defer cancel()
	pods, objs := benchPods(n)
	client := k8sfake.NewClientset(objs...)
	src := NewInformerPodSource(client, testNode)
	if err := src.Run(ctx); err != nil {
		b.Fatal(err)
	}
	host, err := mockhost.New("dgxa100", mockhost.Options{MemoryBytes: 80 << 30})
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(nvml.New(host), client, WithNodeName(testNode), WithPodSource(src), WithResolveWait(0),
		WithHealthCheck(false), WithLogger(klog.Background().V(10)))
	if err != nil {
		b.Fatal(err)
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(n)
	durs := make([]time.Duration, 0, b.N)
	var kl *fake.Kubelet
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if i%n == 0 { // every pod admitted: start the node over
			p.tracker, kl = &tracker{}, &fake.Kubelet{}
			if withKubelet {
				p.cfg.podResources = kl
			}
		}
		pod := pods[order[i%n]]
		kl.AddPod(pod)
		ids := benchIDs(order[i%n])
		req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}}
		b.StartTimer()
		start := time.Now()
		if _, err := p.Allocate(ctx, req); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
		kl.SetDevices(pod, "c", contract.DefaultResourceName, ids)
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-µs")
}

func benchPods(n int) ([]*v1.Pod, []runtime.Object) {
	objs := []runtime.Object{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}}
	var pods []*v1.Pod
	for i := range n {
		pod := st.MakePod().Name(fmt.Sprintf("p%03d", i)).Node(testNode).Created(t0.Add(time.Duration(i)*time.Second)).
			NamedGPUMem("c", 2).Allocation(contract.Allocation{"0": {i % 8: 2}}).Obj()
		pods = append(pods, pod)
		objs = append(objs, pod)
	}
	return pods, objs
}

// benchIDs are the two device IDs of pod i on GPU i%8.
func benchIDs(i int) []string {
	u := int64(i / 8 * 2)
	return []string{deviceID(uuid(i%8), u), deviceID(uuid(i%8), u+1)}
}
