package config_test

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// Least privilege for GPU preemption (issue 38, point 4): the extender's account removes a
// victim by a pod DELETE, which extender-pods.yaml admits only for a pod that asks gpu-mem, is
// below preempt.ProtectedPriority and carries gpushare.io/preempted-by naming a higher
// priority than its own; it evicts only in a dry run; and the mark itself may be written only
// on such a pod, under the fence token (extender-fence.yaml).

const extenderPodsPolicy = "admission/extender-pods.yaml"

// priority sets the pod's spec.priority.
func priority(n int32) podOption { return withSpec(func(s *v1.PodSpec) { s.Priority = &n }) }

// markedBy sets the preemption mark to value.
func markedBy(value string) podOption { return withAnnotation(contract.AnnotationPreemptedBy, value) }

// requestsGPUMem makes the pod ask gpu-mem in requests only (no limit), in container main.
func requestsGPUMem(p *v1.Pod) {
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{contract.DefaultResourceName: resource.MustParse("4")}}
}

// deleteBy is username's DELETE of the stored pod p.
func deleteBy(username string, p *v1.Pod) admissionRequest {
	return admissionRequest{operation: admission.Delete, oldObject: p, username: username}
}

// evictionBy is username's eviction of pod p, a dry run or not.
func evictionBy(username string, dryRun bool) admissionRequest {
	return admissionRequest{subresource: "eviction", username: username, dryRun: dryRun,
		object: &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: metav1.NamespaceDefault}}}
}

// TestExtenderPodsDelete: the extender's account deletes only gpu-mem pods below the protected
// priority that carry a well-formed mark of a higher priority; others' deletes are not its
// policy's business.
func TestExtenderPodsDelete(t *testing.T) {
	protected := preempt.ProtectedPriority
	del := func(opts ...podOption) admissionRequest { return deleteBy(extenderUser, gpuPod(opts...)) }
	runPolicyCases(t, extenderPodsPolicy, []policyCase{
		{name: "marked by a higher priority", req: del(priority(10), markedBy("default/high/1000")), allowed: true},
		{name: "no priority counts 0", req: del(markedBy("default/high/1")), allowed: true},
		{name: "negative priorities", req: del(priority(-5), markedBy("default/high/-1")), allowed: true},
		{name: "preemptor in another namespace", req: del(priority(10), markedBy("team-b/trainer/1000")), allowed: true},
		{name: "gpu-mem in requests only", req: deleteBy(extenderUser, plainPod(requestsGPUMem, priority(10), markedBy("default/high/1000"))), allowed: true},
		{name: "gpu-mem in an init container only", req: deleteBy(extenderUser, plainPod(onInitContainer("setup", gpuMem("2")), markedBy("default/high/1000"))), allowed: true},
		{name: "just below the protected priority", req: del(priority(protected-1), markedBy("default/high/"+strconv.Itoa(int(protected)))), allowed: true},
		{name: "dry run, marked", req: func() admissionRequest { r := del(markedBy("default/high/1")); r.dryRun = true; return r }(), allowed: true},

		{name: "pod without gpu-mem", req: deleteBy(extenderUser, plainPod(markedBy("default/high/1000"))), message: []string{"only pods that ask " + contract.DefaultResourceName, "default/p asks none"}},
		{name: "gpu-mem pod without the mark", req: del(priority(10)), message: []string{contract.AnnotationPreemptedBy, "(10)", "it carries none"}},
		{name: "dry run without the mark", req: func() admissionRequest { r := del(); r.dryRun = true; return r }(), message: []string{"it carries none"}},
		{name: "mark of the same priority", req: del(priority(10), markedBy("default/high/10")), message: []string{"above its own (10)", `"default/high/10"`}},
		{name: "mark of a lower priority", req: del(priority(10), markedBy("default/high/5")), message: []string{"above its own (10)"}},
		{name: "mark without a namespace", req: del(markedBy("high/1000")), message: []string{`"high/1000"`}},
		{name: "mark with an empty name", req: del(markedBy("default//1000")), message: []string{`"default//1000"`}},
		{name: "mark with an extra part", req: del(markedBy("default/high/1000/x")), message: []string{`"default/high/1000/x"`}},
		{name: "mark priority not a number", req: del(markedBy("default/high/x")), message: []string{`"default/high/x"`}},
		{name: "mark priority empty", req: del(markedBy("default/high/")), message: []string{`"default/high/"`}},
		{name: "mark priority of 11 digits", req: del(markedBy("default/high/10000000000")), message: []string{`"default/high/10000000000"`}},
		{name: "mark priority with a plus sign", req: del(markedBy("default/high/+1000")), message: []string{`"default/high/+1000"`}},
		{name: "highest user priority", req: del(priority(protected), markedBy("default/node-agent/2000000000")), message: []string{"at or above 1000000000", "system-critical"}},
		{name: "system-node-critical", req: del(priority(2000001000), markedBy("default/x/2000001001")), message: []string{"priority 2000001000", "system-critical"}},

		{name: "another user deletes a pod without gpu-mem", req: deleteBy(ordinaryUser, plainPod()), allowed: true},
		{name: "same account name in another namespace", req: deleteBy("system:serviceaccount:default:gpushare-extender", plainPod()), allowed: true},
	})
}

// TestExtenderPodsEviction: the extender's account evicts only in a dry run (its
// PodDisruptionBudget check); a real eviction would bypass the delete rule.
func TestExtenderPodsEviction(t *testing.T) {
	runPolicyCases(t, extenderPodsPolicy, []policyCase{
		{name: "dry run", req: evictionBy(extenderUser, true), allowed: true},
		{name: "real eviction", req: evictionBy(extenderUser, false), message: []string{"only in a dry run", "eviction of pod default/p is not allowed"}},
		// admission sees the request's dryRun (?dryRun=All), not the Eviction's deleteOptions
		{name: "dry run only in the Eviction's body", req: func() admissionRequest {
			r := evictionBy(extenderUser, false)
			r.object.(*policyv1.Eviction).DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
			return r
		}(), message: []string{"only in a dry run"}},
		{name: "another user's eviction", req: evictionBy(ordinaryUser, false), allowed: true},
	})
}

// TestExtenderPodsMark: the extender may set or change the mark only on a pod it could then
// delete (asks gpu-mem, below the protected priority) and only to a well-formed value naming a
// higher priority; it never removes it, and an update that leaves a mark alone is not checked
// for it.
func TestExtenderPodsMark(t *testing.T) {
	tok := withAnnotation(contract.AnnotationFence, "ext-a/1")
	mark := func(old *v1.Pod, value string) admissionRequest {
		p := old.DeepCopy()
		markedBy(value)(p)
		tok(p)
		return update(extenderUser, old, p)
	}
	runPolicyCases(t, extenderPodsPolicy, []policyCase{
		{name: "higher priority", req: mark(gpuPod(priority(10)), "default/high/1000"), allowed: true},
		{name: "changed to another higher priority", req: mark(gpuPod(priority(10), markedBy("default/high/1000")), "default/higher/2000"), allowed: true},
		{name: "same priority", req: mark(gpuPod(priority(10)), "default/high/10"), message: []string{contract.AnnotationPreemptedBy, "above its own (10)", `not "default/high/10"`}},
		{name: "pod without gpu-mem", req: mark(plainPod(priority(10)), "default/high/1000"), message: []string{"(it asks none)"}},
		{name: "malformed", req: mark(gpuPod(), "high"), message: []string{`not "high"`}},
		{name: "system-critical pod", req: mark(gpuPod(priority(2000000000)), "default/x/2000001000"), message: []string{"system-critical"}},
		{name: "removed", req: update(extenderUser, gpuPod(markedBy("default/high/1000")), gpuPod(tok)), message: []string{"never removes " + contract.AnnotationPreemptedBy, "default/p keeps it"}},
		{name: "a hold written beside an old mark left alone", req: update(extenderUser, gpuPod(priority(10), markedBy("default/high/5")),
			gpuPod(priority(10), markedBy("default/high/5"), withAnnotation(contract.DefaultPreemptionKey, "{}"), tok)), allowed: true},
		{name: "with a label change", req: func() admissionRequest {
			r := mark(gpuPod(priority(10)), "default/high/1000")
			withLabel("team", "x")(r.object.(*v1.Pod))
			return r
		}(), message: []string{"labels"}},
		{name: "another user writes it", req: update(ordinaryUser, gpuPod(), gpuPod(markedBy("default/high/1000"))), allowed: true},
	})
}

// TestPreemptionMarkAcrossPolicies: the extender's mark, as pkg/scheduler writes it, passes the
// pod-requests policy (it is no placement annotation) and the fence policy only under the
// current token.
func TestPreemptionMarkAcrossPolicies(t *testing.T) {
	holder := "ext-b@10.0.0.2:8443"
	current := lease(holder, new(int32(3)))
	token := server.FenceToken(holder, 3)
	old := gpuPod(priority(10), withAnnotation(contract.AnnotationFence, server.FenceToken("ext-a", 2)))
	marked := func(tok string) *v1.Pod {
		return gpuPod(priority(10), markedBy("default/high/1000"), withAnnotation(contract.AnnotationFence, tok))
	}
	runPolicyCases(t, podRequestsPolicy, []policyCase{
		{name: "pod-requests: the extender's mark", req: update(extenderUser, old, marked(token)), allowed: true},
	})
	runPolicyCases(t, fencePolicy, []policyCase{
		{name: "fence: mark under the current token", req: withParams(update(extenderUser, old, marked(token)), current), allowed: true},
		{name: "fence: mark under a stale token", req: withParams(update(extenderUser, old, marked(server.FenceToken("ext-a", 2))), current),
			message: []string{"under fence token ext-a/2"}},
		{name: "fence: mark without a token", req: withParams(update(extenderUser, gpuPod(priority(10)), gpuPod(priority(10), markedBy("default/high/1000"))), current),
			message: []string{"without a fence token"}},
		{name: "fence: a DELETE is not matched", req: withParams(deleteBy(extenderUser, marked(token)), current), allowed: true},
	})
}
