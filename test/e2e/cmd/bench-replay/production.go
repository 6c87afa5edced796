package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/sim"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// namespace is where the replayed pods run (sim.PodObject's namespace).
const namespace = "openb"

// decideTimeout is how long one pod may take to be bound or found unschedulable.
const decideTimeout = 60 * time.Second

// production is the real control plane the trace is replayed on.
type production struct {
	cluster *framework.Cluster
	ext     *framework.Extender
	names   contract.Names
	watch   *outcomes
	// latencies are create→bound times of the placed pods, in order; gpuLatencies and
	// cpuLatencies split them into pods with and without gpu-mem.
	latencies, gpuLatencies, cpuLatencies []time.Duration
	// taintGPUNodes taints every node with gpuTaint, which only pods asking gpu-mem tolerate.
	taintGPUNodes bool
	// expected are the simulator's nodes for the same sequence (extender's ties; "" for a
	// rejected pod); the first pods production places otherwise are logged, to find where the
	// two part.
	expected []string
	// nodes are production's nodes, likewise.
	nodes []string
	// convert, when set, turns each pod of the sequence into the pod created (DRA mode: its
	// gpu-mem ask into claims, draconvert); nil creates the pod as the sequence has it.
	convert func(ctx context.Context, pod *v1.Pod) (*v1.Pod, error)
	// placedUnits adds up the gpu-mem the placed pods asked, in units (before any conversion).
	placedUnits int64
}

// logDivergences is how many pods decided unlike the simulator are logged.
const logDivergences = 20

// gpuTaint keeps pods without gpu-mem off GPU nodes in the --taint-gpu-nodes experiment.
var gpuTaint = v1.Taint{Key: "gpushare.io/gpu", Value: "true", Effect: v1.TaintEffectNoSchedule}

// startProduction starts etcd, kube-apiserver, the extender with policy and kube-scheduler with
// the shipped configuration, and watches the replayed pods.
func startProduction(ctx context.Context, opts framework.Options, extBin, policy string, taintGPUNodes bool) (*production, error) {
	c, err := benchrun.StartCluster(ctx, opts, namespace)
	if err != nil {
		return nil, err
	}
	p := &production{cluster: c, names: contract.DefaultNames(), taintGPUNodes: taintGPUNodes}
	if err := p.start(ctx, extBin, policy); err != nil {
		c.Stop()
		return nil, err
	}
	return p, nil
}

func (p *production) start(ctx context.Context, extBin, policy string) error {
	c := p.cluster
	ext, err := c.StartExtender(ctx, extBin, 0, "--policy="+policy, "--v=1")
	if err != nil {
		return err
	}
	p.ext = ext
	if err := c.StartScheduler(ext.Host()); err != nil {
		return err
	}
	p.watch = newOutcomes()
	return benchrun.WatchPods(ctx, c.Client, namespace, p.watch.observe)
}

// addNodes creates the trace's nodes as the share-plugin publishes them (sim.NodeObject: the
// GPU inventory annotation, 1,000 units per card) with their CPU, memory, gpu-mem and gpu-count
// allocatable, Ready, one at a time in the trace's order, so that kube-scheduler holds them in
// the order the simulator's model of its node sampling assumes; then waits until the
// extender's cache holds them all.
func (p *production) addNodes(ctx context.Context, nodes []sim.Node) error {
	t0 := time.Now()
	for i := range nodes {
		if err := p.addNode(ctx, &nodes[i]); err != nil {
			return err
		}
	}
	if err := benchrun.WaitCached(ctx, p.ext, "extender cache to hold every node", len(nodes)); err != nil {
		return err
	}
	logf("%d nodes created and cached in %.1f s", len(nodes), time.Since(t0).Seconds())
	return nil
}

func (p *production) addNode(ctx context.Context, n *sim.Node) error {
	node, err := sim.NodeObject(n, &p.names)
	if err != nil {
		return err
	}
	allocatable := node.Status.Allocatable
	node.Status = v1.NodeStatus{}
	node.Labels = map[string]string{"kubernetes.io/hostname": node.Name}
	if p.taintGPUNodes {
		node.Spec.Taints = []v1.Taint{gpuTaint}
	}
	allocatable[v1.ResourcePods] = *resource.NewQuantity(1000, resource.DecimalSI)
	allocatable[p.names.Resource] = *resource.NewQuantity(int64(n.GPUs)*sim.MilliPerGPU, resource.DecimalSI)
	allocatable[p.names.Count] = *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI)
	return p.cluster.AddReadyNode(ctx, node, allocatable)
}

// submitter creates each pod of the sequence and waits until kube-scheduler has bound it or
// found it unschedulable; an unschedulable pod is deleted at once, so that it is never placed
// later (each pod is placed once or rejected).
func (p *production) submitter(ctx context.Context) sim.Submit {
	cs := p.cluster.Client
	submitted, placed, t0, diverged := 0, 0, time.Now(), 0
	// note logs a pod that production decides unlike the simulator; units is its gpu-mem ask
	// (its limits may no longer say it: convert).
	note := func(pod *v1.Pod, node string, units *resource.Quantity) {
		i := submitted - 1
		if i >= len(p.expected) || p.expected[i] == node || diverged >= logDivergences {
			return
		}
		diverged++
		c := pod.Spec.Containers[0]
		logf("pod #%d %s (cpu %s, %s %s, annotations %v): production's node %q, the simulator's %q",
			i, pod.Name, c.Resources.Requests.Cpu(), p.names.Resource, units,
			pod.Annotations, node, p.expected[i])
	}
	return func(pod *v1.Pod) (bool, error) {
		if submitted++; submitted%1000 == 0 {
			logf("%d pods submitted, %d placed, %.1f pods/s", submitted, placed, float64(submitted)/time.Since(t0).Seconds())
		}
		pod = pod.DeepCopy()
		pod.UID = ""
		pod.Spec.SchedulerName = p.cluster.SchedulerName
		pod.Spec.Containers[0].Image = benchrun.PauseImage
		units, gpu := pod.Spec.Containers[0].Resources.Limits[p.names.Resource]
		if gpu && p.taintGPUNodes {
			pod.Spec.Tolerations = []v1.Toleration{{Key: gpuTaint.Key, Operator: v1.TolerationOpEqual, Value: gpuTaint.Value, Effect: gpuTaint.Effect}}
		}
		if p.convert != nil {
			var err error
			if pod, err = p.convert(ctx, pod); err != nil {
				return false, err
			}
		}
		decided := p.watch.expect(pod.Name)
		created := time.Now()
		if _, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return false, fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		select {
		case node := <-decided:
			ok := node != ""
			p.nodes = append(p.nodes, node)
			note(pod, node, &units)
			if ok {
				placed++
				p.recordPlaced(time.Since(created), gpu, units.Value())
				return true, nil
			}
			zero := int64(0)
			if err := cs.CoreV1().Pods(namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				return false, fmt.Errorf("delete rejected pod %s: %w", pod.Name, err)
			}
			return false, nil
		case <-time.After(decideTimeout):
			return false, fmt.Errorf("pod %s neither bound nor found unschedulable within %v", pod.Name, decideTimeout)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// recordPlaced records a placed pod's create→bound time and, for a pod with gpu-mem, its ask.
func (p *production) recordPlaced(took time.Duration, gpu bool, units int64) {
	p.latencies = append(p.latencies, took)
	if !gpu {
		p.cpuLatencies = append(p.cpuLatencies, took)
		return
	}
	p.gpuLatencies = append(p.gpuLatencies, took)
	p.placedUnits += units
}

// outcomes tells each waiting submission the node its pod was bound to, or "" when it was found
// unschedulable, from the pod informer.
type outcomes struct {
	mu      sync.Mutex
	waiting map[string]chan string
}

func newOutcomes() *outcomes { return &outcomes{waiting: map[string]chan string{}} }

// expect registers a pod before it is created.
func (o *outcomes) expect(name string) <-chan string {
	ch := make(chan string, 1)
	o.mu.Lock()
	o.waiting[name] = ch
	o.mu.Unlock()
	return ch
}

// observe tells the submission waiting for pod, if any, where pod went once it is bound or found
// unschedulable.
func (o *outcomes) observe(pod *v1.Pod) {
	if pod.Spec.NodeName == "" && !unschedulable(pod) {
		return
	}
	o.mu.Lock()
	ch, ok := o.waiting[pod.Name]
	delete(o.waiting, pod.Name)
	o.mu.Unlock()
	if ok {
		ch <- pod.Spec.NodeName // "" when unschedulable
	}
}

func unschedulable(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
