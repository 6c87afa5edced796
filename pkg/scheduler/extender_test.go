package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// env is an extender over a fake API server holding the given nodes and pods.
type env struct {
	ctx    context.Context
	client *fake.Clientset
	cache  cache.Cache
	ext    *scheduler.Extender
}

func newEnv(t *testing.T, policyName string, nodes []*v1.Node, pods ...*v1.Pod) *env {
	t.Helper()
	return newEnvWith(t, newPolicy(t, policyName), nodes, pods...)
}

// newEnvWith is newEnv with a policy of the caller's.
func newEnvWith(t *testing.T, policy placement.Policy, nodes []*v1.Node, pods ...*v1.Pod) *env {
	t.Helper()
	return newEnvOpts(t, policy, nil, nodes, pods...)
}

// newEnvOpts is newEnvWith with extender options of the caller's.
func newEnvOpts(t *testing.T, policy placement.Policy, opts []scheduler.Option, nodes []*v1.Node, pods ...*v1.Pod) *env {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	client.PrependReactor("create", "pods", bindingReactor(client))
	c := cache.New(contract.DefaultNames(), logger)
	for _, n := range nodes {
		c.SetNode(n)
	}
	for _, p := range pods {
		c.SetPod(p)
	}
	nodeIndex := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, n := range nodes {
		if err := nodeIndex.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	opts = append([]scheduler.Option{scheduler.WithClock(func() time.Time { return time.Unix(0, 1000) }),
		scheduler.WithSettleOptions(fastSettle), scheduler.WithNodeLister(corelisters.NewNodeLister(nodeIndex))}, opts...)
	ext := scheduler.NewExtender(c, client, policy, contract.DefaultNames(), opts...)
	t.Cleanup(func() { ext.WaitSettled(context.Background()) })
	return &env{ctx: ctx, client: client, cache: c, ext: ext}
}

// fastSettle settles unknown bind outcomes quickly, for tests.
var fastSettle = scheduler.SettleOptions{FirstRetry: time.Millisecond, MaxRetry: 5 * time.Millisecond,
	Timeout: 300 * time.Millisecond}

// newPolicy builds the named policy.
func newPolicy(t *testing.T, name string) placement.Policy {
	t.Helper()
	p, err := policies.NewRegistry().New(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bindingReactor makes the fake clientset's Bind set spec.nodeName and copy the Binding's
// annotations onto the pod in one update, as the API server does, and refuse a second binding
// with a Conflict.
func bindingReactor(client *fake.Clientset) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(k8stesting.CreateAction)
		if !ok || action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := ca.GetObject().(*v1.Binding)
		pods := client.Tracker()
		obj, err := pods.Get(v1.SchemeGroupVersion.WithResource("pods"), b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if pod.Spec.NodeName != "" {
			return true, nil, conflict(pod)
		}
		pod.Spec.NodeName = b.Target.Name
		copyAnnotations(pod, b)
		return true, b, pods.Update(v1.SchemeGroupVersion.WithResource("pods"), pod, b.Namespace)
	}
}

// copyAnnotations copies a Binding's annotations onto its pod, as the binding subresource does.
func copyAnnotations(pod *v1.Pod, b *v1.Binding) {
	if len(b.Annotations) > 0 && pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for k, v := range b.Annotations {
		pod.Annotations[k] = v
	}
}

func conflict(pod *v1.Pod) error {
	return apierrors.NewConflict(v1.Resource("pods/binding"), pod.Name,
		fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
}

// apiPod reads a pod back from the fake API server.
func (e *env) apiPod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := e.client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
