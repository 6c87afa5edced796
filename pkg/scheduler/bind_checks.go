package scheduler

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Bind refuses what kube-scheduler would never ask: a caller that reaches the extender without
// kube-scheduler's filters (or with a stale view) cannot put a pod where it may not run.
var (
	// ErrNotManaged: the pod asks no GPU memory; the extender binds only the pods it places on
	// cards (the shipped scheduler configurations send only those to bind).
	ErrNotManaged = errors.New("the pod asks no GPU memory: the extender binds only pods it places on GPUs")
	// ErrNodeRefusesPod: the pod's node selector, required node affinity or tolerations keep it
	// off the node.
	ErrNodeRefusesPod = errors.New("the pod may not run on the node")
	// ErrInsufficientResources: the pod's CPU or memory request does not fit in what the node
	// has left (kube-scheduler's NodeResourcesFit would refuse it).
	ErrInsufficientResources = errors.New("the node has not enough CPU or memory left for the pod")
)

// WithNodeLister lets Bind check the pod against the node's labels and taints (the informer's
// nodes); without it Bind checks only that the extender knows the node.
func WithNodeLister(l corelisters.NodeLister) Option { return func(o *options) { o.ext.nodes = l } }

// checkBind refuses to bind pod to nodeName unless the pod asks GPU memory (req), the node is
// known, the pod's CPU and memory requests fit in the node's allocatable less the requests of
// the pods the cache holds there (kube-scheduler's NodeResourcesFit for those two), and the
// pod's node selector, required node affinity and tolerations admit the node, as
// kube-scheduler's NodeAffinity and TaintToleration filters would. The node's pod count,
// ports, volumes and extended resources other than GPU memory are not checked: the kubelet
// refuses a pod over its pod limit or asking what the node lacks at admission (docs/security.md).
// The node's CPU and memory are those of info, the node as the caller read it from the cache
// (ok: the cache knows it), so that a bind reads its node once.
func (e *Extender) checkBind(pod *v1.Pod, req *contract.PodRequest, nodeName string, info *placement.NodeInfo, ok bool) error {
	if req.Empty() {
		return fmt.Errorf("bind %s: %w (it asks no %s)", klog.KObj(pod), ErrNotManaged, e.names.Resource)
	}
	if !ok {
		return fmt.Errorf("bind %s: %w: %s", klog.KObj(pod), cache.ErrUnknownNode, nodeName)
	}
	if err := fitsCPUMemory(pod, info); err != nil {
		return fmt.Errorf("bind %s to %s: %w", klog.KObj(pod), nodeName, err)
	}
	if e.nodes == nil {
		return nil
	}
	node, err := e.nodes.Get(nodeName)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("bind %s: %w: %s", klog.KObj(pod), cache.ErrUnknownNode, nodeName)
	}
	if err != nil {
		return fmt.Errorf("bind %s: node %s: %w", klog.KObj(pod), nodeName, err)
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		why := "its node selector or required node affinity does not match the node's labels"
		if err != nil {
			why = fmt.Sprintf("its required node affinity is invalid: %v", err)
		}
		return fmt.Errorf("bind %s to %s: %w: %s", klog.KObj(pod), nodeName, ErrNodeRefusesPod, why)
	}
	noScheduleOrExecute := func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}
	if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noScheduleOrExecute, true); untolerated {
		return fmt.Errorf("bind %s to %s: %w: it does not tolerate the taint %s", klog.KObj(pod), nodeName, ErrNodeRefusesPod, taint.ToString())
	}
	return nil
}

// fitsCPUMemory refuses a pod whose CPU or memory request exceeds what node has left: its
// allocatable less the requests of the pods on it, the pod itself left out (a retried bind
// finds its own assumption there). A node whose allocatable the cache does not know (0) is not
// checked.
func fitsCPUMemory(pod *v1.Pod, node *placement.NodeInfo) error {
	res := podResources(pod)
	cpu, mem := node.RequestedMilliCPU, node.RequestedMemory
	for i := range node.Pods {
		if node.Pods[i].UID == pod.UID {
			cpu, mem = cpu-node.Pods[i].MilliCPU, mem-res.Memory
		}
	}
	if node.AllocatableMilliCPU > 0 && res.MilliCPU > node.AllocatableMilliCPU-cpu {
		return fmt.Errorf("%w: it requests %dm CPU, %dm of %dm are left", ErrInsufficientResources, res.MilliCPU, node.AllocatableMilliCPU-cpu, node.AllocatableMilliCPU)
	}
	if node.AllocatableMemory > 0 && res.Memory > node.AllocatableMemory-mem {
		return fmt.Errorf("%w: it requests %d bytes of memory, %d of %d are left", ErrInsufficientResources, res.Memory, node.AllocatableMemory-mem, node.AllocatableMemory)
	}
	return nil
}
