package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/gpushare/gpushare/pkg/contract"
)

// GPUNode is node name as the share-plugin publishes it (n cards of units GiB, model Tesla T4, in
// the node annotation) and the allocatable to give it with AddReadyNode: 64 CPUs, 256 GiB, 110
// pods, the cards' gpu-mem and gpu-count.
func GPUNode(name string, n int, units int64) (*v1.Node, v1.ResourceList, error) {
	names := contract.DefaultNames()
	inv, err := contract.EncodeGPUs(Cards(name, "Tesla T4", units, n))
	if err != nil {
		return nil, nil, err
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name},
		Annotations: map[string]string{names.NodeGPUsAnnotation: inv}}}
	return node, v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("256Gi"),
		v1.ResourcePods: resource.MustParse("110"),
		names.Resource:  *resource.NewQuantity(int64(n)*units, resource.DecimalSI),
		names.Count:     *resource.NewQuantity(int64(n), resource.DecimalSI),
	}, nil
}

// Cards returns n healthy cards of the given model and units, indexes 0..n-1, with UUIDs that
// embed the node name so that every card in the cluster is distinct.
func Cards(node, model string, units int64, n int) []contract.GPU {
	gpus := make([]contract.GPU, n)
	for i := range gpus {
		gpus[i] = contract.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", node, i), Model: model, Units: units, Healthy: true}
	}
	return gpus
}

// AddGPUNode creates a fake node managed by kwok and publishes its GPUs the way share-plugin
// does: the contract's node annotation, status capacity/allocatable gpu-mem (sum of healthy
// cards' units) and gpu-count. It removes the not-ready taint the TaintNodesByCondition
// admission adds (kube-controller-manager would, and there is none) and waits until kwok has
// made the node Ready.
func (c *Cluster) AddGPUNode(ctx context.Context, name string, gpus []contract.GPU) error {
	names := contract.DefaultNames()
	inv, err := contract.EncodeGPUs(gpus)
	if err != nil {
		return err
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{"kubernetes.io/hostname": name, "type": "kwok"},
		Annotations: map[string]string{KwokSelector: "fake", names.NodeGPUsAnnotation: inv},
	}}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	if err := c.SetNodeGPUStatus(ctx, name, gpus); err != nil {
		return err
	}
	if err := c.RemoveNotReadyTaint(ctx, name); err != nil {
		return err
	}
	return c.waitNodeReady(ctx, name)
}

// SetNodeGPUStatus patches the node's status with the resources share-plugin advertises.
func (c *Cluster) SetNodeGPUStatus(ctx context.Context, name string, gpus []contract.GPU) error {
	names := contract.DefaultNames()
	var units int64
	for _, g := range gpus {
		if g.Healthy {
			units += g.Units
		}
	}
	res := map[string]string{
		"cpu": "64", "memory": "256Gi", "pods": "250",
		string(names.Resource): strconv.FormatInt(units, 10),
		string(names.Count):    strconv.Itoa(len(gpus)),
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"capacity": res, "allocatable": res}})
	_, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch status of node %s: %w", name, err)
	}
	return nil
}

// RemoveNotReadyTaint removes the node.kubernetes.io/not-ready taint that the TaintNodesByCondition
// admission puts on every new node (kube-controller-manager's node lifecycle controller, which
// is not run here, would).
func (c *Cluster) RemoveNotReadyTaint(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := n.Spec.Taints[:0]
		for _, t := range n.Spec.Taints {
			if t.Key != v1.TaintNodeNotReady {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(n.Spec.Taints) {
			return nil
		}
		n.Spec.Taints = kept
		_, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func (c *Cluster) waitNodeReady(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return WaitFor(ctx, 200*time.Millisecond, "node "+name+" Ready", func() (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// AddReadyNode creates node without a kubelet or kwok behind it, publishes status (its
// allocatable is also its capacity) with a Ready condition, and removes the not-ready taint: a
// node kube-scheduler schedules onto, for benchmarks that never run the pods.
func (c *Cluster) AddReadyNode(ctx context.Context, node *v1.Node, allocatable v1.ResourceList) error {
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", node.Name, err)
	}
	now := metav1.Now()
	status := v1.NodeStatus{Allocatable: allocatable, Capacity: allocatable,
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "Benchmark", LastHeartbeatTime: now, LastTransitionTime: now}}}
	raw, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, raw, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patch status of node %s: %w", node.Name, err)
	}
	return c.RemoveNotReadyTaint(ctx, node.Name)
}

// EnsureNamespace creates namespace and its default ServiceAccount if missing (no
// kube-controller-manager may run to create the latter).
func (c *Cluster) EnsureNamespace(ctx context.Context, namespace string) error {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: namespace}}
	if _, err := c.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ServiceAccount in %s: %w", namespace, err)
	}
	return nil
}

// NvidiaGPUResource is the resource NVIDIA's device plugin advertises: whole GPUs.
const NvidiaGPUResource v1.ResourceName = "nvidia.com/gpu"

// AddWholeGPUNode creates a fake node managed by kwok as NVIDIA's device plugin (or the GPU
// Operator) publishes it: gpus whole GPUs as nvidia.com/gpu, the label the GPU Operator's
// feature discovery sets, and none of gpushare's resources or annotations; then waits until kwok
// has made it Ready.
func (c *Cluster) AddWholeGPUNode(ctx context.Context, name string, gpus int) error {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{"kubernetes.io/hostname": name, "type": "kwok", "nvidia.com/gpu.present": "true"},
		Annotations: map[string]string{KwokSelector: "fake"},
	}}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	res := map[string]string{"cpu": "64", "memory": "256Gi", "pods": "250", string(NvidiaGPUResource): strconv.Itoa(gpus)}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"capacity": res, "allocatable": res}})
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patch status of node %s: %w", name, err)
	}
	if err := c.RemoveNotReadyTaint(ctx, name); err != nil {
		return err
	}
	return c.waitNodeReady(ctx, name)
}
