package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// The accounts and nodes of TestAdmission.
const (
	gpushareNS    = "kube-system"
	extenderSA    = "gpushare-extender"
	pluginSA      = "gpushare-share-plugin"
	nodeNameClaim = "authentication.kubernetes.io/node-name"
	nodeA         = "gpu-a" // the share-plugin's node
	nodeB         = "gpu-b"
)

// admissionEnv is TestAdmission's cluster: etcd and kube-apiserver only, with the shipped RBAC
// and admission policies, and clients that impersonate gpushare's service accounts.
type admissionEnv struct {
	t     *testing.T
	ctx   context.Context
	c     *framework.Cluster
	admin kubernetes.Interface
	// extender and plugin impersonate the service accounts; plugin carries nodeA's node-name
	// claim as its pod-bound token would, pluginNoClaim does not.
	extender, plugin, pluginNoClaim kubernetes.Interface
	// pods are the pods that must exist at the end, namespace/name.
	pods map[string]bool
	// refused are the pods whose creation had to be refused.
	refused map[string]bool
}

// admissionCase is one request and what the API server must answer: allowed when want is
// empty, otherwise refused with an error that contains every string of want.
type admissionCase struct {
	name string
	do   func(ctx context.Context) error
	want []string
	// creates is the namespace/name of the pod the request creates, if any.
	creates string
}

// TestAdmission applies config/extender/rbac.yaml, config/share-plugin/rbac.yaml and
// config/admission/ to a real kube-apiserver and shows each gpushare account refused outside its
// lane and allowed inside it, and bad gpu-mem pods refused at the door with the policy's message.
// It ends by checking that exactly the expected pods exist and that no refused write left a
// trace.
func TestAdmission(t *testing.T) {
	t0 := time.Now()
	a := newAdmissionEnv(t)
	a.ensureNamespaces()
	// before the policies: only the extender and the plugin may write placements once they apply
	a.createObjects()
	a.applyManifests()
	a.waitPoliciesEnforced()
	t.Logf("cluster, manifests and policies ready in %.1f s", time.Since(t0).Seconds())

	a.run("extender", a.extenderCases())
	a.overgrantExtender()
	a.run("extender-overgranted", a.overgrantedExtenderCases())
	a.run("share-plugin-nodes", a.pluginNodeCases())
	a.run("share-plugin-pods", a.pluginPodCases())
	a.run("pod-requests", a.podRequestCases())
	a.run("pod-updates", a.podUpdateCases())

	a.checkAdmitted()
	t.Logf("TestAdmission took %.1f s", time.Since(t0).Seconds())
}

func newAdmissionEnv(t *testing.T) *admissionEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := artifactDir(t)
	c, err := framework.New(framework.Options{Root: s.root, Bin: s.bin, Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		c.Stop()
		if t.Failed() {
			t.Logf("---- last lines of kube-apiserver.log ----\n%s", framework.TailFile(filepath.Join(dir, "kube-apiserver.log"), 40))
		}
	})
	if err := c.StartControlPlane(ctx); err != nil {
		t.Fatal(err)
	}
	a := &admissionEnv{t: t, ctx: ctx, c: c, admin: c.Client, pods: map[string]bool{}, refused: map[string]bool{}}
	a.extender = a.impersonate(extenderSA, "")
	a.plugin = a.impersonate(pluginSA, nodeA)
	a.pluginNoClaim = a.impersonate(pluginSA, "")
	return a
}

// impersonate returns a client that acts as the service account gpushareNS/sa, with the
// node-name claim of a pod-bound token when node is not empty.
func (a *admissionEnv) impersonate(sa, node string) kubernetes.Interface {
	a.t.Helper()
	cfg := rest.CopyConfig(a.c.RestConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + gpushareNS + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + gpushareNS},
	}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{nodeNameClaim: {node}}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		a.t.Fatal(err)
	}
	return cs
}

// rbacManifests are the RBAC files of the extender and the plugin.
func rbacManifests() []string {
	return []string{
		filepath.Join(s.root, "config", "extender", "rbac.yaml"),
		filepath.Join(s.root, "config", "share-plugin", "rbac.yaml"),
	}
}

// ensureNamespaces creates the namespaces the RBAC names.
func (a *admissionEnv) ensureNamespaces() {
	a.t.Helper()
	for _, ns := range manifestNamespaces(a.t, rbacManifests()...) {
		if err := a.c.EnsureNamespace(a.ctx, ns); err != nil {
			a.t.Fatal(err)
		}
	}
}

// applyManifests applies the RBAC and the admission policies with kubectl, as an operator
// would (ensureNamespaces first).
func (a *admissionEnv) applyManifests() {
	a.t.Helper()
	for _, f := range append(rbacManifests(), filepath.Join(s.root, "config", "admission")) {
		cmd := exec.CommandContext(a.ctx, filepath.Join(s.bin, "kubectl"), "apply", "-f", f)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+a.c.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			a.t.Fatalf("kubectl apply -f %s: %v\n%s", f, err, out)
		}
		a.t.Logf("kubectl apply -f %s:\n%s", f, strings.TrimSpace(string(out)))
	}
}

// manifestNamespaces lists the namespaces the objects of the YAML files live in.
func manifestNamespaces(t *testing.T, files ...string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---") {
			var obj metav1.PartialObjectMetadata
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj.Namespace != "" {
				seen[obj.Namespace] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// createObjects creates, as admin, the two GPU nodes and the pods the cases write: a bound GPU
// pod on each node, two unbound GPU pods and a system pod on the plugin's node.
func (a *admissionEnv) createObjects() {
	a.t.Helper()
	names := contract.DefaultNames()
	inv, err := contract.EncodeGPUs(framework.Cards(nodeB, "Tesla T4", 16, 2))
	if err != nil {
		a.t.Fatal(err)
	}
	for _, n := range []struct {
		name string
		ann  map[string]string
	}{{nodeA, nil}, {nodeB, map[string]string{names.NodeGPUsAnnotation: inv}}} {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"kubernetes.io/hostname": n.name}, Annotations: n.ann}}
		if _, err := a.admin.CoreV1().Nodes().Create(a.ctx, node, metav1.CreateOptions{}); err != nil {
			a.t.Fatal(err)
		}
		// what the kubelet publishes: gpu-mem from the device plugin, an address
		status := map[string]any{"status": map[string]any{
			"capacity":    map[string]string{string(names.Resource): "32", "pods": "110"},
			"allocatable": map[string]string{string(names.Resource): "32", "pods": "110"},
			"addresses":   []map[string]string{{"type": "InternalIP", "address": "10.0.0.1"}},
		}}
		if _, err := a.admin.CoreV1().Nodes().Patch(a.ctx, n.name, types.MergePatchType, mustJSON(a.t, status), metav1.PatchOptions{}, "status"); err != nil {
			a.t.Fatal(err)
		}
	}
	a.createPod(admissionPod("default", "on-a", nodeA, "4", a.placement(0)))
	a.createPod(admissionPod("default", "on-b", nodeB, "4", a.placement(0)))
	a.createPod(admissionPod("default", "pending-1", "", "4", nil))
	a.createPod(admissionPod("default", "pending-2", "", "4", nil))
	a.createPod(admissionPod(gpushareNS, "system-pod", nodeA, "", nil))
}

func (a *admissionEnv) createPod(pod *v1.Pod) {
	a.t.Helper()
	if _, err := a.admin.CoreV1().Pods(pod.Namespace).Create(a.ctx, pod, metav1.CreateOptions{}); err != nil {
		a.t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	a.pods[pod.Namespace+"/"+pod.Name] = true
}

// placement is the contract's annotations of a pod whose one container has 4 units on GPU gpu
// of a node of two 16-unit cards, as the extender writes them.
func (a *admissionEnv) placement(gpu int) map[string]string {
	a.t.Helper()
	req := contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Name: "main", Units: 4, GPUs: 1}}}
	ann, err := contract.PlacementAnnotations(contract.Allocation{"0": {gpu: 4}}, &req, map[int]int64{0: 16, 1: 16}, time.Now())
	if err != nil {
		a.t.Fatal(err)
	}
	return ann
}

// admissionPod is a pod with one container "main", asking gpuMem of gpu-mem unless it is
// empty, bound to node unless it is empty, with the RuntimeDefault seccomp profile that the
// pod-requests policy asks of GPU pods.
func admissionPod(ns, name, node, gpuMem string, ann map[string]string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{
			Name: "main", Image: "registry.k8s.io/pause:3.10",
		}}, SecurityContext: &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}},
	}
	if gpuMem != "" {
		pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{contract.DefaultResourceName: resource.MustParse(gpuMem)}
	}
	return pod
}

// waitPoliciesEnforced waits until each policy refuses a probe: the API server compiles a new
// policy and starts enforcing it a moment after it is created. The probes are dry runs or
// name objects that do not exist, so they change nothing whatever the answer; the extender's
// and the plugin's probes also wait for their RBAC to be in effect.
func (a *admissionEnv) waitPoliciesEnforced() {
	a.t.Helper()
	dry := []string{metav1.DryRunAll}
	probes := map[string]func(context.Context) error{
		"gpushare-pod-requests": func(ctx context.Context) error {
			_, err := a.admin.CoreV1().Pods("default").Create(ctx, admissionPod("default", "probe", "", "0", nil), metav1.CreateOptions{DryRun: dry})
			return err
		},
		"gpushare-extender-pods": func(ctx context.Context) error {
			b := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "no-such-pod", Annotations: map[string]string{"probe": "x"}},
				Target: v1.ObjectReference{Kind: "Node", Name: nodeA}}
			return a.extender.CoreV1().Pods("default").Bind(ctx, b, metav1.CreateOptions{DryRun: dry})
		},
		"gpushare-share-plugin-nodes": func(ctx context.Context) error {
			_, err := a.plugin.CoreV1().Nodes().Patch(ctx, nodeB, types.MergePatchType, annotate(a.t, map[string]string{"probe": "x"}), metav1.PatchOptions{DryRun: dry})
			return err
		},
		"gpushare-share-plugin-pods": func(ctx context.Context) error {
			_, err := a.plugin.CoreV1().Pods("default").Patch(ctx, "on-b", types.MergePatchType, annotate(a.t, map[string]string{"probe": "x"}), metav1.PatchOptions{DryRun: dry})
			return err
		},
	}
	for policy, probe := range probes {
		t0 := time.Now()
		var last error
		err := poll(a.ctx, 60*time.Second, func() (bool, error) {
			last = probe(a.ctx)
			return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy '"+policy+"'"), nil
		})
		if err != nil {
			a.t.Fatalf("policy %s not enforced: %v (last answer: %v)", policy, err, last)
		}
		a.t.Logf("policy %s enforced after %.1f s", policy, time.Since(t0).Seconds())
	}
}

// run runs the cases in order as subtests of group and logs every refusal.
func (a *admissionEnv) run(group string, cases []admissionCase) {
	a.t.Run(group, func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.do(a.ctx)
				if tc.creates != "" {
					if len(tc.want) == 0 {
						a.pods[tc.creates] = err == nil || a.pods[tc.creates]
					} else {
						a.refused[tc.creates] = true
					}
				}
				switch {
				case len(tc.want) == 0 && err != nil:
					t.Fatalf("refused, want allowed: %v", err)
				case len(tc.want) == 0:
					t.Log("allowed")
				case err == nil:
					t.Fatalf("allowed, want refused with %q", tc.want)
				default:
					t.Logf("refused: %v", err)
					for _, w := range tc.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("refusal does not say %q", w)
						}
					}
				}
			})
		}
	})
}

// byPolicy is what a refusal by a gpushare policy must contain.
func byPolicy(policy string, says ...string) []string {
	return append([]string{"ValidatingAdmissionPolicy '" + policy + "'"}, says...)
}

func (a *admissionEnv) extenderCases() []admissionCase {
	const policy = "gpushare-extender-pods"
	img := imagePatch(a.t)
	return []admissionCase{
		// RBAC grants the extender pod patches (the preemption hold); the policy allows no more.
		{name: "patching a pod's image", do: a.patchPod(a.extender, types.StrategicMergePatchType, "default", "on-a", img),
			want: byPolicy(policy, "not its spec")},
		{name: "writes the preemption hold on a pending pod", do: a.patchPod(a.extender, types.MergePatchType, "default", "pending-2",
			annotate(a.t, map[string]string{contract.DefaultPreemptionKey: `{"node":"gpu-a","gpu":0,"units":4,"until":"2030-01-01T00:00:00Z"}`}))},
		{name: "evicts a pod (dry run)", do: func(ctx context.Context) error { return dryRunEviction(ctx, a.extender, "default", "on-a") }},
		// RBAC grants real evictions and deletes (GPU preemption); the policy bounds them.
		{name: "evicts a pod for real", do: func(ctx context.Context) error {
			return a.extender.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "on-a", Namespace: "default"}})
		}, want: byPolicy(policy, "only in a dry run")},
		{name: "deletes a GPU pod not marked preempted", do: func(ctx context.Context) error {
			return a.extender.CoreV1().Pods("default").Delete(ctx, "on-a", metav1.DeleteOptions{})
		}, want: byPolicy(policy, contract.AnnotationPreemptedBy, "it carries none")},
		{name: "binds a pod with the placement annotations", do: a.bind("pending-1", a.placement(1), true)},
		{name: "binding with another annotation", do: a.bind("pending-2", map[string]string{"example.com/owner": "me"}, false),
			want: byPolicy(policy, "it also carries example.com/owner")},
	}
}

// bind creates pod's Binding to nodeA with ann as the extender; check verifies that the pod
// got bound with them.
func (a *admissionEnv) bind(pod string, ann map[string]string, check bool) func(context.Context) error {
	return func(ctx context.Context) error {
		b := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod, Annotations: ann}, Target: v1.ObjectReference{Kind: "Node", Name: nodeA}}
		if err := a.extender.CoreV1().Pods("default").Bind(ctx, b, metav1.CreateOptions{}); err != nil || !check {
			return err
		}
		got, err := a.admin.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for k, v := range ann {
			if got.Annotations[k] != v {
				return fmt.Errorf("pod %s: annotation %s=%q, want %q", pod, k, got.Annotations[k], v)
			}
		}
		if got.Spec.NodeName != nodeA {
			return fmt.Errorf("pod %s on node %q, want %s", pod, got.Spec.NodeName, nodeA)
		}
		return nil
	}
}

// overgrantExtender grants the extender's account what its RBAC does not (updates of pods,
// writes of their status), as a careless operator might, and waits until RBAC lets it through:
// then only the policy stands between it and the pods.
func (a *admissionEnv) overgrantExtender() {
	a.t.Helper()
	const name = "e2e-gpushare-extender-overgranted"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"update", "patch", "delete"},
	}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: extenderSA, Namespace: gpushareNS}}}
	if _, err := a.admin.RbacV1().ClusterRoles().Create(a.ctx, role, metav1.CreateOptions{}); err != nil {
		a.t.Fatal(err)
	}
	if _, err := a.admin.RbacV1().ClusterRoleBindings().Create(a.ctx, crb, metav1.CreateOptions{}); err != nil {
		a.t.Fatal(err)
	}
	probe := annotate(a.t, map[string]string{contract.AnnotationAssigned: "false"})
	var last error
	err := poll(a.ctx, 30*time.Second, func() (bool, error) {
		_, last = a.extender.CoreV1().Pods("default").Patch(a.ctx, "on-a", types.MergePatchType, probe, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil, nil
	})
	if err != nil {
		a.t.Fatalf("extra RBAC for the extender not in effect: %v (last answer: %v)", err, last)
	}
}

func (a *admissionEnv) overgrantedExtenderCases() []admissionCase {
	const policy = "gpushare-extender-pods"
	return []admissionCase{
		{name: "patching a pod's image", do: a.patchPod(a.extender, types.StrategicMergePatchType, "default", "on-a", imagePatch(a.t)),
			want: byPolicy(policy, "not its spec")},
		{name: "patching another annotation", do: a.patchPod(a.extender, types.MergePatchType, "default", "on-a", annotate(a.t, map[string]string{"example.com/owner": "me"})),
			want: byPolicy(policy, "not example.com/owner")},
		{name: "patching a label", do: a.patchPod(a.extender, types.MergePatchType, "default", "on-a", mustJSON(a.t, map[string]any{"metadata": map[string]any{"labels": map[string]string{"app": "x"}}})),
			want: byPolicy(policy, "labels")},
		{name: "patching pods/status", do: a.patchPod(a.extender, types.MergePatchType, "default", "on-a", mustJSON(a.t, map[string]any{"status": map[string]any{"message": "x"}}), "status"),
			want: byPolicy(policy, "UPDATE of pods/status is not allowed")},
		{name: "patching a placement annotation", do: a.patchPod(a.extender, types.MergePatchType, "default", "pending-2", annotate(a.t, map[string]string{contract.AnnotationAssigned: "false"}))},
	}
}

func (a *admissionEnv) pluginNodeCases() []admissionCase {
	const policy = "gpushare-share-plugin-nodes"
	names := contract.DefaultNames()
	inv, err := contract.EncodeGPUs(framework.Cards(nodeA, "Tesla T4", 16, 2))
	if err != nil {
		a.t.Fatal(err)
	}
	count := map[string]string{string(names.Count): "2"}
	status := func(st map[string]any) []byte { return mustJSON(a.t, map[string]any{"status": st}) }
	p := func(cs kubernetes.Interface, node string, body []byte, sub ...string) func(context.Context) error {
		return a.patchNode(cs, node, body, sub...)
	}
	return []admissionCase{
		{name: "publishes its node's GPU inventory", do: p(a.plugin, nodeA, annotate(a.t, map[string]string{names.NodeGPUsAnnotation: inv}))},
		{name: "publishes its node's gpu-count", do: p(a.plugin, nodeA, status(map[string]any{"capacity": count, "allocatable": count}), "status")},
		{name: "another node's status", do: p(a.plugin, nodeB, status(map[string]any{"capacity": count, "allocatable": count}), "status"),
			want: byPolicy(policy, "of node gpu-a may change only its own Node, not node gpu-b")},
		{name: "another node's inventory", do: p(a.plugin, nodeB, annotate(a.t, map[string]string{names.NodeGPUsAnnotation: inv})),
			want: byPolicy(policy, "not node gpu-b")},
		{name: "its node's labels", do: p(a.plugin, nodeA, mustJSON(a.t, map[string]any{"metadata": map[string]any{"labels": map[string]string{"gpushare": "true"}}})),
			want: byPolicy(policy, "not its spec (taints, unschedulable, ...) or labels")},
		{name: "its node's spec", do: p(a.plugin, nodeA, mustJSON(a.t, map[string]any{"spec": map[string]any{"unschedulable": true}})),
			want: byPolicy(policy, "not its spec")},
		{name: "another annotation of its node", do: p(a.plugin, nodeA, annotate(a.t, map[string]string{"example.com/x": "y"})),
			want: byPolicy(policy, "not example.com/x")},
		{name: "its node's gpu-mem capacity", do: p(a.plugin, nodeA, status(map[string]any{"capacity": map[string]string{string(names.Resource): "64"}}), "status"),
			want: byPolicy(policy, "not status.capacity[aliyun.com/gpu-mem]")},
		{name: "its node's addresses", do: p(a.plugin, nodeA, status(map[string]any{"addresses": []map[string]string{{"type": "InternalIP", "address": "10.9.9.9"}}}), "status"),
			want: byPolicy(policy, "not its addresses")},
		{name: "its node without a node-name claim", do: p(a.pluginNoClaim, nodeA, annotate(a.t, map[string]string{names.NodeGPUsAnnotation: inv})),
			want: byPolicy(policy, "carry no node-name claim")},
		{name: "RBAC refuses deleting a node", do: func(ctx context.Context) error {
			return a.plugin.CoreV1().Nodes().Delete(ctx, nodeB, metav1.DeleteOptions{})
		}, want: []string{`cannot delete resource "nodes"`}},
	}
}

func (a *admissionEnv) patchNode(cs kubernetes.Interface, node string, body []byte, sub ...string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{}, sub...)
		return err
	}
}

func (a *admissionEnv) pluginPodCases() []admissionCase {
	const policy = "gpushare-share-plugin-pods"
	ann := func(m map[string]string) []byte { return annotate(a.t, m) }
	moved := a.placement(1)
	placement := map[string]string{ // what patchPlacement writes
		contract.AnnotationAllocation: moved[contract.AnnotationAllocation],
		contract.AnnotationIndex:      moved[contract.AnnotationIndex],
		contract.AnnotationDev:        moved[contract.AnnotationDev],
	}
	merge := types.MergePatchType
	return []admissionCase{
		{name: "marks a pod on its node assigned", do: a.patchPod(a.plugin, merge, "default", "on-a", ann(map[string]string{contract.AnnotationAssigned: "true"}))},
		{name: "corrects the placement of a pod on its node", do: a.patchPod(a.plugin, merge, "default", "on-a", ann(placement))},
		{name: "records an Event", do: func(ctx context.Context) error {
			ev := &v1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "on-a.", Namespace: "default"}, Reason: "GPUShareAllocateFailed", Message: "e2e", Type: v1.EventTypeWarning,
				InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "on-a", APIVersion: "v1"}}
			_, err := a.plugin.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{})
			return err
		}},
		{name: "another annotation of a pod on its node", do: a.patchPod(a.plugin, merge, "default", "on-a", ann(map[string]string{"example.com/owner": "me"})),
			want: byPolicy(policy, "not example.com/owner")},
		{name: "the extender's bind record of a pod on its node", do: a.patchPod(a.plugin, merge, "default", "on-a", ann(map[string]string{contract.AnnotationPod: "16"})),
			want: byPolicy(policy, "not ALIYUN_COM_GPU_MEM_POD")},
		{name: "a pod on another node", do: a.patchPod(a.plugin, merge, "default", "on-b", ann(map[string]string{contract.AnnotationAssigned: "true"})),
			want: byPolicy(policy, "pod default/on-b is on node gpu-b")},
		{name: "an unbound pod", do: a.patchPod(a.plugin, merge, "default", "pending-2", ann(map[string]string{contract.AnnotationAssigned: "true"})),
			want: byPolicy(policy, "pod default/pending-2 is not bound to a node")},
		{name: "the image of a system pod on its node", do: a.patchPod(a.plugin, types.StrategicMergePatchType, gpushareNS, "system-pod", imagePatch(a.t)),
			want: byPolicy(policy, "of pod kube-system/system-pod, not its spec")},
		{name: "a pod without a node-name claim", do: a.patchPod(a.pluginNoClaim, merge, "default", "on-a", ann(map[string]string{contract.AnnotationAssigned: "true"})),
			want: byPolicy(policy, "carry no node-name claim")},
		{name: "RBAC refuses deleting a pod on its node", do: func(ctx context.Context) error {
			return a.plugin.CoreV1().Pods("default").Delete(ctx, "on-a", metav1.DeleteOptions{})
		}, want: []string{`cannot delete resource "pods"`}},
	}
}

func (a *admissionEnv) patchPod(cs kubernetes.Interface, pt types.PatchType, ns, name string, body []byte, sub ...string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := cs.CoreV1().Pods(ns).Patch(ctx, name, pt, body, metav1.PatchOptions{}, sub...)
		return err
	}
}

func (a *admissionEnv) podRequestCases() []admissionCase {
	const policy = "gpushare-pod-requests"
	names := contract.DefaultNames()
	count := func(v string) map[string]string { return map[string]string{names.GPUCountAnnotation: v} }
	model := func(v string) map[string]string { return map[string]string{names.ModelAnnotation: v} }
	initPod := admissionPod("default", "bad-init", "", "4", nil)
	initPod.Spec.InitContainers = []v1.Container{{Name: "warmup", Image: "registry.k8s.io/pause:3.10",
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{contract.DefaultResourceName: resource.MustParse("2000")}}}}
	core := func(v string) map[string]string { return map[string]string{names.CoreAnnotation: v} }
	// containers that would switch their GPU memory limit off (docs/isolation.md)
	withEnv := func(name, env string) *v1.Pod {
		p := admissionPod("default", name, "", "4", nil)
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "OK", Value: "1"}, {Name: env, Value: "80g"}}
		return p
	}
	withMount := func(name, path string) *v1.Pod {
		p := admissionPod("default", name, "", "4", nil)
		p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: path}}
		return p
	}
	cases := []struct {
		pod  *v1.Pod
		want []string
	}{
		{admissionPod("default", "bad-core-0", "", "4", core("0")), byPolicy(policy, `gpushare.io/gpu-core="0" must be an integer from 1 to 100`)},
		{admissionPod("default", "bad-core-101", "", "4", core("101")), byPolicy(policy, "from 1 to 100")},
		{admissionPod("default", "bad-core-pct", "", "4", core("30%")), byPolicy(policy, `gpushare.io/gpu-core="30%"`)},
		{withEnv("bad-env-limit", "CUDA_DEVICE_MEMORY_LIMIT_0"), byPolicy(policy, `container "main" sets CUDA_DEVICE_MEMORY_LIMIT_0`, "the share-plugin and the GPU runtime set them")},
		{withEnv("bad-env-cache", "CUDA_DEVICE_MEMORY_SHARED_CACHE"), byPolicy(policy, "sets CUDA_DEVICE_MEMORY_SHARED_CACHE")},
		{withEnv("bad-env-sm", "CUDA_DEVICE_SM_LIMIT"), byPolicy(policy, "sets CUDA_DEVICE_SM_LIMIT")},
		{withEnv("bad-env-visible", "CUDA_VISIBLE_DEVICES"), byPolicy(policy, "sets CUDA_VISIBLE_DEVICES")},
		{withMount("bad-mount-preload", "/etc/ld.so.preload"), byPolicy(policy, `container "main" mounts at "/etc/ld.so.preload"`)},
		{withMount("bad-mount-counters", "/tmp/gpushare/"), byPolicy(policy, `mounts at "/tmp/gpushare/"`)},
		{withMount("bad-mount-spelling", "/etc//ld.so.preload"), byPolicy(policy, `mounts at "/etc//ld.so.preload"`)},
		{withMount("bad-mount-library", "/usr/local/gpushare/hami-core"), byPolicy(policy, `mounts at "/usr/local/gpushare/hami-core"`)},
		{withMount("bad-mount-tmp", "/tmp"), byPolicy(policy, `mounts at "/tmp"`)}, // above the plugin's /tmp/gpushare
		{admissionPod("default", "ok-core-30", "", "4", core("30")), nil},
		{withMount("ok-mount-data", "/data"), nil},
		{withEnv("ok-env-other", "LIBCUDA_LOG_LEVEL"), nil},
		{admissionPod("default", "bad-500m", "", "500m", nil), []string{"must be an integer"}},
		{admissionPod("default", "bad-zero", "", "0", nil), byPolicy(policy, `container "main" asks aliyun.com/gpu-mem=0`, "must be a positive number of units")},
		{admissionPod("default", "bad-2000", "", "2000", nil), byPolicy(policy, "2000 units", "more than any GPU holds (at most 1024 units per GPU)")},
		{admissionPod("default", "bad-10gi", "", "10Gi", nil), byPolicy(policy, "10737418240 units", "not 10Gi")},
		{initPod, byPolicy(policy, `container "warmup" asks aliyun.com/gpu-mem=2k (2000 units)`)},
		{admissionPod("default", "bad-split", "", "4", count("3")), byPolicy(policy, "do not split evenly over the 3 GPUs")},
		{admissionPod("default", "bad-count-0", "", "4", count("0")), byPolicy(policy, `gpushare.io/gpu-count="0" must be an integer from 1 to 64`)},
		{admissionPod("default", "bad-count-abc", "", "4", count("two")), byPolicy(policy, `gpushare.io/gpu-count="two"`)},
		{admissionPod("default", "bad-count-65", "", "4", count("65")), byPolicy(policy, "from 1 to 64")},
		{admissionPod("default", "bad-model-long", "", "4", model(strings.Repeat("A100", 17))), byPolicy(policy, "a model name is longer than 64 bytes")},
		// 64 characters, 127 bytes: the extender counts bytes, so the policy does too
		{admissionPod("default", "bad-model-multibyte", "", "4", model("A"+strings.Repeat("é", 63))), byPolicy(policy, "a model name is longer than 64 bytes")},
		{admissionPod("default", "bad-model-huge", "", "4", model(strings.Repeat("A100|", 600))), byPolicy(policy, ": 3000 bytes long")},
		{admissionPod("default", "bad-model-many", "", "4", model(strings.Repeat("T4|", 39)+"T4")), byPolicy(policy, "it names 40 models")},
		{admissionPod("default", "bad-model-empty", "", "4", model(" | ")), byPolicy(policy, "it names no model")},
		{admissionPod("default", "bad-model-ctrl", "", "4", model("A100\nH100")), byPolicy(policy, "it contains control characters")},
		{admissionPod("default", "bad-model-token", "", "4", model("A100|--")), byPolicy(policy, "a model name has no letter or digit")},
		{admissionPod("default", "bad-count-no-gpu", "", "", count("0")), byPolicy(policy, "must be an integer from 1 to 64")},
		{admissionPod("default", "ok-4", "", "4", nil), nil},
		{admissionPod("default", "ok-2x4", "", "8", map[string]string{names.GPUCountAnnotation: "2", names.ModelAnnotation: "A100|H100"}), nil},
		{admissionPod("default", "ok-1024", "", "1024", nil), nil},
		{admissionPod("default", "ok-32-models", "", "4", model(strings.Repeat("NVIDIA A100-SXM4-80GB|", 31)+"H100")), nil},
		{admissionPod("default", "ok-no-gpu", "", "", nil), nil},
	}
	out := make([]admissionCase, 0, len(cases))
	for _, c := range cases {
		out = append(out, admissionCase{name: c.pod.Name, want: c.want, creates: c.pod.Namespace + "/" + c.pod.Name,
			do: func(ctx context.Context) error {
				_, err := a.admin.CoreV1().Pods(c.pod.Namespace).Create(ctx, c.pod, metav1.CreateOptions{})
				return err
			}})
	}
	return out
}

// podUpdateCases change the gpushare annotations of existing pods: a bad value is refused, an
// update that leaves them alone is not.
func (a *admissionEnv) podUpdateCases() []admissionCase {
	const policy = "gpushare-pod-requests"
	names := contract.DefaultNames()
	merge := types.MergePatchType
	return []admissionCase{
		{name: "gpu-count set to 0", do: a.patchPod(a.admin, merge, "default", "ok-4", annotate(a.t, map[string]string{names.GPUCountAnnotation: "0"})),
			want: byPolicy(policy, `gpushare.io/gpu-count="0"`)},
		{name: "gpu-core set to 200", do: a.patchPod(a.admin, merge, "default", "ok-4", annotate(a.t, map[string]string{names.CoreAnnotation: "200"})),
			want: byPolicy(policy, `gpushare.io/gpu-core="200"`)},
		{name: "gpu-model set to a valid value", do: a.patchPod(a.admin, merge, "default", "ok-4", annotate(a.t, map[string]string{names.ModelAnnotation: "T4"}))},
		{name: "a label of a GPU pod", do: a.patchPod(a.admin, merge, "default", "ok-2x4", mustJSON(a.t, map[string]any{"metadata": map[string]any{"labels": map[string]string{"team": "a"}}}))},
		{name: "a user writes the preemption hold", do: a.patchPod(a.admin, merge, "default", "ok-4",
			annotate(a.t, map[string]string{contract.DefaultPreemptionKey: `{"node":"gpu-a","gpu":0,"units":4,"until":"2030-01-01T00:00:00Z"}`})),
			want: byPolicy(policy, "written by the gpushare extender only")},
		{name: "a user rewrites a placement", do: a.patchPod(a.admin, merge, "default", "on-b",
			annotate(a.t, map[string]string{contract.AnnotationIndex: "1"})),
			want: byPolicy(policy, contract.AnnotationIndex, "written by the gpushare extender and share-plugin only")},
	}
}

// checkAdmitted is the test's invariant check: exactly the expected pods exist (none whose
// creation had to be refused), no refused write changed the objects it aimed at, and every
// admitted pod is a valid gpushare request on cards that hold it (framework.CheckInvariants).
func (a *admissionEnv) checkAdmitted() {
	a.t.Helper()
	var got, want []string
	for _, ns := range []string{"default", gpushareNS} {
		list, err := a.admin.CoreV1().Pods(ns).List(a.ctx, metav1.ListOptions{})
		if err != nil {
			a.t.Fatal(err)
		}
		for i := range list.Items {
			got = append(got, ns+"/"+list.Items[i].Name)
		}
	}
	for p, ok := range a.pods {
		if ok && !a.refused[p] {
			want = append(want, p)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		a.t.Errorf("pods (-want,+got):\n%s", diff)
	}
	a.checkUntouched()
	inv, err := a.c.CheckInvariants(a.ctx, "default", nil)
	if err != nil {
		a.t.Fatalf("invariants: %v", err)
	}
	if !inv.OK() {
		a.t.Errorf("invariants: %s", inv)
	}
}

// checkUntouched verifies what the refused writes aimed at.
func (a *admissionEnv) checkUntouched() {
	a.t.Helper()
	names := contract.DefaultNames()
	sys, err := a.admin.CoreV1().Pods(gpushareNS).Get(a.ctx, "system-pod", metav1.GetOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	onB, err := a.admin.CoreV1().Pods("default").Get(a.ctx, "on-b", metav1.GetOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	b, err := a.admin.CoreV1().Nodes().Get(a.ctx, nodeB, metav1.GetOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	nA, err := a.admin.CoreV1().Nodes().Get(a.ctx, nodeA, metav1.GetOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	_, bCount := b.Status.Capacity[names.Count]
	addrOK := len(nA.Status.Addresses) == 1 && nA.Status.Addresses[0].Address == "10.0.0.1"
	for what, bad := range map[string]bool{
		"system pod's image changed":              sys.Spec.Containers[0].Image != "registry.k8s.io/pause:3.10",
		"on-b's annotations changed":              onB.Annotations[contract.AnnotationAssigned] != "false" || onB.Annotations["probe"] != "",
		"node gpu-b got a gpu-count":              bCount,
		"node gpu-a's labels, spec or addresses":  nA.Labels["gpushare"] != "" || nA.Spec.Unschedulable || !addrOK,
		"node gpu-a's gpu-mem capacity changed":   nA.Status.Capacity.Name(names.Resource, resource.DecimalSI).Value() != 32,
		"node gpu-a lacks the plugin's inventory": nA.Annotations[names.NodeGPUsAnnotation] == "" || nA.Status.Capacity.Name(names.Count, resource.DecimalSI).Value() != 2,
	} {
		if bad {
			a.t.Errorf("%s", what)
		}
	}
}

func imagePatch(t *testing.T) []byte {
	return mustJSON(t, map[string]any{"spec": map[string]any{"containers": []map[string]string{{"name": "main", "image": "example.com/evil:1"}}}})
}

func annotate(t *testing.T, ann map[string]string) []byte {
	return mustJSON(t, map[string]any{"metadata": map[string]any{"annotations": ann}})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
