package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// env is one test's cluster: control plane, kwok, our extender and kube-scheduler.
type env struct {
	t   *testing.T
	ctx context.Context
	c   *framework.Cluster
	ext *framework.Extender
	// extArgs are the extra extender flags, reused on restart.
	extArgs []string
}

// newEnv starts a fresh cluster for t with the extender run with extra flags; everything is
// stopped by PID when t ends, and the logs are printed if t failed.
func newEnv(t *testing.T, extenderFlags ...string) *env {
	t.Helper()
	e := newEnvWithoutScheduler(t, extenderFlags...)
	if err := e.c.StartScheduler(e.ext.Host()); err != nil {
		t.Fatal(err)
	}
	return e
}

// newEnvWithoutScheduler is newEnv up to the extender: the caller starts kube-scheduler.
func newEnvWithoutScheduler(t *testing.T, extenderFlags ...string) *env {
	t.Helper()
	return newEnvWithOptions(t, nil, extenderFlags...)
}

// newEnvWithOptions is newEnvWithoutScheduler with the cluster's options adjusted by opts
// (feature gates, runtime config), when not nil.
func newEnvWithOptions(t *testing.T, opts func(*framework.Options), extenderFlags ...string) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := artifactDir(t)
	o := framework.Options{Root: s.root, Bin: s.bin, Dir: dir, Logf: t.Logf}
	if opts != nil {
		opts(&o)
	}
	c, err := framework.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, c: c, extArgs: extenderFlags}
	t.Cleanup(func() {
		cancel()
		c.Stop()
		if t.Failed() {
			dumpLogs(t, dir)
		}
	})
	if err := c.StartControlPlane(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.StartControllerManager(); err != nil {
		t.Fatal(err)
	}
	if err := c.StartKwok(); err != nil {
		t.Fatal(err)
	}
	e.ext, err = c.StartExtender(ctx, s.extender, 0, extenderFlags...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func dumpLogs(t *testing.T, dir string) {
	for _, name := range []string{"extender", "extender-a", "extender-b", "kube-scheduler", "kube-controller-manager", "share-plugin", "kubelet", "containerd"} {
		p := filepath.Join(dir, name+".log")
		if _, err := os.Stat(p); err == nil {
			t.Logf("---- last lines of %s ----\n%s", p, framework.TailFile(p, 40))
		}
	}
}

// nodes adds GPU nodes: name → cards.
func (e *env) nodes(spec map[string][]contract.GPU) {
	e.t.Helper()
	errs := make(chan error, len(spec))
	sem := make(chan struct{}, 8) // a few at a time: each waits for kwok to make its node Ready
	for name, gpus := range spec {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs <- e.c.AddGPUNode(e.ctx, name, gpus)
		}()
	}
	for range spec {
		if err := <-errs; err != nil {
			e.t.Fatal(err)
		}
	}
}

// gpuPod is a one-container pod asking units of gpu-mem from our scheduler.
func (e *env) gpuPod(name string, units int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       gpuPodSpec(e.c.SchedulerName, units),
	}
}

func gpuPodSpec(scheduler string, units int64) v1.PodSpec {
	q := *resource.NewQuantity(units, resource.DecimalSI)
	return v1.PodSpec{
		SchedulerName: scheduler,
		// kwok's fake nodes carry this taint in its stock examples; ours do not, but tolerate it.
		Tolerations: []v1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: v1.TolerationOpExists}},
		Containers: []v1.Container{{
			Name:      "main",
			Image:     "busybox",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{contract.DefaultResourceName: q}},
		}},
	}
}

func (e *env) create(pod *v1.Pod) {
	e.t.Helper()
	if _, err := e.c.Client.CoreV1().Pods(pod.Namespace).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create pod %s: %v", pod.Name, err)
	}
}

// waitBound waits until the pod has a node and returns it.
func (e *env) waitBound(name string, timeout time.Duration) *v1.Pod {
	e.t.Helper()
	var pod *v1.Pod
	err := poll(e.ctx, timeout, func() (bool, error) {
		p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Spec.NodeName != "", nil
	})
	if err != nil {
		e.t.Fatalf("pod %s not bound: %v\nevents:\n%s", name, err, e.events(name))
	}
	return pod
}

// events renders the events of a pod, one per line.
func (e *env) events(pod string) string {
	list, err := e.c.Client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod,
	})
	if err != nil {
		return err.Error()
	}
	out := ""
	for _, ev := range list.Items {
		out += fmt.Sprintf("  %s %s: %s\n", ev.Type, ev.Reason, ev.Message)
	}
	return out
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return framework.WaitFor(ctx, 200*time.Millisecond, "condition", cond)
}
