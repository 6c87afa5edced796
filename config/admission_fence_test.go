package config_test

import (
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

const fencePolicy = "admission/extender-fence.yaml"

// lease is the extender's Lease held by holder ("" none) after transitions changes of holder
// (nil: the field unset, as on a Lease never taken over).
func lease(holder string, transitions *int32) *coordinationv1.Lease {
	cfg := server.DefaultElectionConfig()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Spec: coordinationv1.LeaseSpec{LeaseTransitions: transitions}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	return l
}

// fencedBinding is the extender's Binding of pod p carrying token ("" none) and a placement.
func fencedBinding(token string, params *coordinationv1.Lease) admissionRequest {
	ann := map[string]string{contract.AnnotationIndex: "0", contract.AnnotationAllocation: "{}"}
	if token != "" {
		ann[contract.AnnotationFence] = token
	}
	r := admissionRequest{subresource: "binding", username: extenderUser,
		object: &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann}, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}}
	if params != nil {
		r.params = params
	}
	return r
}

// withParams is r with the Lease l as the policy's param.
func withParams(r admissionRequest, l *coordinationv1.Lease) admissionRequest {
	r.params = l
	return r
}

// TestExtenderFencePolicyCEL: the fence policy admits the extender's Bindings and pod patches
// of placement or preemption annotations only under the Lease's current token
// "holderIdentity/leaseTransitions"; without a Lease (leader election off) it checks nothing,
// and it never looks at other users' requests.
func TestExtenderFencePolicyCEL(t *testing.T) {
	holder := "ext-b@10.0.0.2:8443"
	current := lease(holder, new(int32(3)))
	token := server.FenceToken(holder, 3)
	hold := withAnnotation(contract.DefaultPreemptionKey, `{"node":"n1"}`)
	fence := func(tok string) podOption { return withAnnotation(contract.AnnotationFence, tok) }
	stale := server.FenceToken("ext-a@10.0.0.1:8443", 2)
	runPolicyCases(t, fencePolicy, []policyCase{
		{name: "binding under the current token", req: fencedBinding(token, current), allowed: true},
		{name: "binding of the previous term", req: fencedBinding(stale, current), message: []string{"under fence token " + stale, "is at " + token, "another replica leads"}},
		{name: "binding of the same holder's earlier term", req: fencedBinding(server.FenceToken(holder, 1), current), message: []string{"is at " + token}},
		{name: "binding without a token", req: fencedBinding("", current), message: []string{"without a fence token", "pod default/p"}},
		{name: "binding after the Lease was released", req: fencedBinding(token, lease("", new(int32(3)))), message: []string{"is at /3"}},
		{name: "leaseTransitions unset counts 0", req: fencedBinding(server.FenceToken(holder, 0), lease(holder, nil)), allowed: true},
		{name: "no Lease: election off, nothing checked", req: fencedBinding("", nil), allowed: true},
		{name: "kube-scheduler's own binding", req: func() admissionRequest {
			r := fencedBinding("", current)
			r.username = "system:kube-scheduler"
			return r
		}(), allowed: true},
		{name: "hold written under the current token", req: withParams(update(extenderUser, gpuPod(), gpuPod(hold, fence(token))), current), allowed: true},
		{name: "hold written under a stale token", req: withParams(update(extenderUser, gpuPod(), gpuPod(hold, fence(stale))), current), message: []string{"under fence token " + stale}},
		{name: "hold written without a token", req: withParams(update(extenderUser, gpuPod(), gpuPod(hold)), current), message: []string{"without a fence token"}},
		{name: "stale token left on the pod by an earlier term", req: withParams(update(extenderUser, gpuPod(fence(stale)), gpuPod(hold, fence(stale))), current), message: []string{"under fence token " + stale}},
		{name: "hold removed under the current token", req: withParams(update(extenderUser, gpuPod(hold, fence(stale)), gpuPod(fence(token))), current), allowed: true},
		{name: "hold removed under a stale token", req: withParams(update(extenderUser, gpuPod(hold, fence(stale)), gpuPod(fence(stale))), current), message: []string{"under fence token " + stale}},
		{name: "update touching no fenced annotation", req: withParams(update(extenderUser, gpuPod(withAnnotation("other", "1")), gpuPod(withAnnotation("other", "2"))), current), allowed: true},
		{name: "another user's update", req: withParams(update(ordinaryUser, gpuPod(), gpuPod(hold)), current), allowed: true},
	})
}

// TestExtenderPodsAdmitsFence: the extender's least-privilege policy lets the fence token
// through on Bindings and pod patches (extender-fence.yaml checks its value).
func TestExtenderPodsAdmitsFence(t *testing.T) {
	tok := withAnnotation(contract.AnnotationFence, "ext-a/1")
	runPolicyCases(t, "admission/extender-pods.yaml", []policyCase{
		{name: "binding with a token", req: fencedBinding("ext-a/1", nil), allowed: true},
		{name: "hold patch with a token", req: update(extenderUser, gpuPod(), gpuPod(withAnnotation(contract.DefaultPreemptionKey, "{}"), tok)), allowed: true},
		{name: "another annotation beside the token", req: update(extenderUser, gpuPod(), gpuPod(tok, withAnnotation("other", "1"))), message: []string{"not other"}},
	})
}

// TestExtenderFencePolicyParam: the fence policy reads the extender's own Lease (the shipped
// election defaults), a Lease that does not exist allows (leader election off), and the
// annotations it fences are the contract's.
func TestExtenderFencePolicyParam(t *testing.T) {
	p, b := readPolicy(t, fencePolicy)
	cfg := server.DefaultElectionConfig()
	if k := p.Spec.ParamKind; k == nil || k.APIVersion != "coordination.k8s.io/v1" || k.Kind != "Lease" {
		t.Errorf("paramKind %+v, want coordination.k8s.io/v1 Lease", k)
	}
	want := &admissionv1.ParamRef{Name: cfg.Name, Namespace: cfg.Namespace, ParameterNotFoundAction: new(admissionv1.AllowAction)}
	if r := b.Spec.ParamRef; r == nil || fmt.Sprint(*r.ParameterNotFoundAction) != fmt.Sprint(*want.ParameterNotFoundAction) || r.Name != want.Name || r.Namespace != want.Namespace || r.Selector != nil {
		t.Errorf("paramRef %+v, want %s/%s, parameterNotFoundAction Allow", r, want.Namespace, want.Name)
	}
}

// BenchmarkBindingAdmission is what the extender's admission policies cost kube-apiserver per
// Binding of the extender's account: the fence (extender-fence.yaml, the Lease as its param)
// and the account's rules (extender-pods.yaml), each compiled once as kube-apiserver compiles
// it, then matched and validated per request (preparedRequest.run), on a Binding under the
// current token.
func BenchmarkBindingAdmission(b *testing.B) {
	holder := "ext-b@10.0.0.2:8443"
	current := lease(holder, new(int32(3)))
	req := fencedBinding(server.FenceToken(holder, 3), current)
	for _, file := range []string{fencePolicy, "admission/extender-pods.yaml"} {
		b.Run(file, func(b *testing.B) {
			p := compilePolicy(b, file).prepare(b, req)
			for b.Loop() {
				if allowed, msg := p.run(b); !allowed {
					b.Fatalf("%s refused the current leader's Binding: %s", file, msg)
				}
			}
		})
	}
}
