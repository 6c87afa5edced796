package e2e

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// The fragmented cluster of TestDRAFragmentedNodeChoice: three kwok nodes of two 16 GiB cards
// each, published as share-plugin --mode=dra publishes them. Fillers pinned to their nodes
// (kube-scheduler's allocator takes the first card that fits) leave frag-a with a 3 GiB sliver
// on its first card and the most CPU requested, frag-c with half a card taken, frag-b empty.
// The fillers' CPU (40 and 20 cores: a few percent of what kwok gives a node) makes kube-scheduler
// alone's choice certain: its scores, of CPU and memory, rate frag-b best.
const (
	fragCardGiB  = 16
	fragAskUnits = 3
)

// fragFillers are the pinned fillers: name, node, GiB and CPU (milli).
var fragFillers = []struct {
	name, node string
	units, cpu int64
}{{"fill-a", "frag-a", 13, 40000}, {"fill-c", "frag-c", 8, 20000}}

// TestDRAFragmentedNodeChoice: on kwok nodes publishing ResourceSlices, with kube-scheduler
// configured by config/dra/scheduler-config.yaml and the extender in DRA mode (and serving the
// webhook) as its service account under the shipped RBAC, a 3 GiB pod goes
// to frag-a, whose first card (the one kube-scheduler's allocator takes) it fills exactly: the
// extender's FGD choice, predicting first-fit. kube-scheduler alone, on the same cluster,
// spreads by CPU and memory and puts the same pod elsewhere. The test asserts the node each
// pod's claim was allocated on, and ends with the DRA capacity invariant and the extender's
// audit of its cache (cards from the slices, charges from the claims) against the API.
func TestDRAFragmentedNodeChoice(t *testing.T) {
	e := newEnvWithoutScheduler(t, "--dra-mode", "--dra-webhook")
	if err := e.c.InstallDRA(e.ctx, e.ext.URL()); err != nil {
		t.Fatal(err)
	}
	e.extenderAsItsAccount("--dra-mode", "--dra-webhook")
	for _, n := range []string{"frag-a", "frag-b", "frag-c"} {
		if err := e.c.AddGPUNode(e.ctx, n, nil); err != nil {
			t.Fatal(err)
		}
		cards := []framework.DRACard{
			{Index: 0, UUID: "GPU-" + n + "-0", Model: "Tesla T4", CapacityBytes: fragCardGiB << 30},
			{Index: 1, UUID: "GPU-" + n + "-1", Model: "Tesla T4", CapacityBytes: fragCardGiB << 30},
		}
		if err := e.c.PublishDRASlice(e.ctx, framework.DRASlice(draconvert.DefaultDriver, n, cards, 1<<30)); err != nil {
			t.Fatal(err)
		}
	}
	e.c.SchedulerConfig = filepath.Join(s.root, "config", "dra", "scheduler-config.yaml")
	if err := e.c.StartScheduler(e.ext.Host()); err != nil {
		t.Fatal(err)
	}
	for _, f := range fragFillers {
		e.create(e.fragPod(f.name, f.node, f.units, f.cpu))
		if pod := e.waitBound(f.name, time.Minute); pod.Spec.NodeName != f.node {
			t.Fatalf("filler %s on %s, want %s", f.name, pod.Spec.NodeName, f.node)
		}
	}
	e.waitExtenderCards(t, "frag-a", []int64{13, 0})
	e.waitExtenderCards(t, "frag-c", []int64{8, 0})
	if got := e.fragPlace(t, "with-extender"); got != "frag-a" {
		t.Errorf("with the extender, the pod's claim was allocated on %s, want frag-a (its first card's 3 GiB sliver)", got)
	}
	if err := e.c.RestartSchedulerAlone(); err != nil {
		t.Fatal(err)
	}
	if got := e.fragPlace(t, "alone"); got == "frag-a" {
		t.Errorf("kube-scheduler alone allocated the pod's claim on frag-a too: the cluster does not tell the two apart")
	}
	check, err := e.c.CheckDRACapacity(e.ctx, draconvert.DefaultDriver)
	if err != nil {
		t.Fatal(err)
	}
	if !check.OK() {
		t.Errorf("DRA capacity invariant: %s", check)
	}
	// The extender in DRA mode audits its cache against the slices and claims as well.
	var inv framework.Invariants
	if err := poll(e.ctx, 30*time.Second, func() (bool, error) {
		inv, err = e.c.CheckInvariants(e.ctx, "default", e.ext)
		return err == nil && inv.OK(), err
	}); err != nil {
		t.Errorf("invariants with the extender's audit: %s: %v", inv, err)
	}
}

// extenderAsItsAccount restarts the extender on its port with flags, acting as its service
// account under the shipped RBAC: config/extender/rbac.yaml, config/dra/extender-rbac.yaml
// (DRA mode's reads) and the webhook's (config/dra/webhook.yaml, which InstallDRA applied).
func (e *env) extenderAsItsAccount(flags ...string) {
	e.t.Helper()
	files := []string{filepath.Join(s.root, "config", "extender", "rbac.yaml"), filepath.Join(s.root, "config", "dra", "extender-rbac.yaml")}
	if err := e.c.Apply(e.ctx, files...); err != nil {
		e.t.Fatal(err)
	}
	port := e.ext.Port
	e.ext.Proc.Stop(10 * time.Second)
	ext, err := e.c.StartExtender(e.ctx, s.extender, port, append(flags, "--kubeconfig="+e.extenderKubeconfig(""))...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.ext = ext
}

// fragPod is a gpu-mem pod of units GiB and cpu milli-CPU, on node when it is not "".
func (e *env) fragPod(name, node string, units, cpu int64) *v1.Pod {
	pod := e.gpuPod(name, units)
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}
	if node != "" {
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
	return pod
}

// fragPlace schedules the measured pod (fragAskUnits GiB, 100m CPU) and returns the node
// whose card its claim was allocated, after checking that the pod was bound there; it then
// deletes the pod and waits until its claim is gone, so the next placement sees the same
// cluster.
func (e *env) fragPlace(t *testing.T, name string) string {
	t.Helper()
	e.create(e.fragPod(name, "", fragAskUnits, 100))
	pod := e.waitBound(name, time.Minute)
	err := poll(e.ctx, time.Minute, func() (bool, error) {
		p, err := e.c.Client.CoreV1().Pods(pod.Namespace).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return len(p.Status.ResourceClaimStatuses) > 0, nil
	})
	if err != nil {
		t.Fatalf("pod %s has no claim: %v", name, err)
	}
	claim := draClaimOf(t, e, pod)
	claimName := claim.Name
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s of %s: allocation %+v, want one device", claim.Name, name, claim.Status.Allocation)
	}
	r := claim.Status.Allocation.Devices.Results[0]
	if r.Pool != pod.Spec.NodeName {
		t.Errorf("claim %s allocated %s/%s, but the pod is bound to %s", claim.Name, r.Pool, r.Device, pod.Spec.NodeName)
	}
	t.Logf("%s: bound to %s, claim %s allocated %s/%s", name, pod.Spec.NodeName, claim.Name, r.Pool, r.Device)
	if err := e.c.Client.CoreV1().Pods(pod.Namespace).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	err = poll(e.ctx, 2*time.Minute, func() (bool, error) {
		_, err := e.c.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(e.ctx, claimName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("claim %s of deleted pod %s still there: %v", claimName, name, err)
	}
	return r.Pool
}

// waitExtenderCards waits until the extender's view of node (/inspect/<node>), read from its
// ResourceSlices and claims, shows the units used on each card.
func (e *env) waitExtenderCards(t *testing.T, node string, used []int64) {
	t.Helper()
	var got []int64
	err := poll(e.ctx, 30*time.Second, func() (bool, error) {
		var n struct {
			GPUs []struct {
				Used int64 `json:"used"`
			} `json:"gpus"`
		}
		if err := e.ext.GetJSON(e.ctx, framework.ExtenderPrefix+"/inspect/"+node, &n); err != nil {
			return false, nil // not known yet
		}
		got = got[:0]
		for _, g := range n.GPUs {
			got = append(got, g.Used)
		}
		return slices.Equal(got, used), nil
	})
	if err != nil {
		t.Fatalf("extender's cards of %s: used %v, want %v", node, got, used)
	}
}
