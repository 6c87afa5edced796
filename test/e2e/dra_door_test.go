package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/draconvert"
)

// draTenantNS is the namespace of TestDRA/ClaimsAtTheDoor: without the pod-security exemption.
const draTenantNS = "tenant-dra"

// claimsAtTheDoor (TestDRA/ClaimsAtTheDoor): with config/dra/claims-policy.yaml and
// config/admission/pod-requests.yaml installed and the extender serving the webhook as its
// service account (the shipped RBAC), a tenant can reach gpushare's GPU memory through the
// conversion only. A claim written by hand for the shipped DeviceClass is refused at creation;
// a pod that names one of the webhook's gpushare-* templates itself is evaluated by the
// pod-requests policy, which refuses a protected env; a gpu-mem pod is converted, its template
// created by the webhook as the extender's account under the policy. (That the claims
// kube-controller-manager makes from such templates pass is config's TestDRAClaimsPolicyCEL:
// here kube-controller-manager acts as the cluster's admin, not under its own name.) Runs last:
// the extender is restarted as its account.
func (d *draNode) claimsAtTheDoor(t *testing.T) {
	e := d.e.forSubtest(t)
	e.extenderAsItsAccount("--dra-webhook")
	if err := e.c.Apply(e.ctx, filepath.Join(s.root, "config", "dra", "claims-policy.yaml"),
		filepath.Join(s.root, "config", "admission", "pod-requests.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := e.c.EnsureNamespace(e.ctx, draTenantNS); err != nil {
		t.Fatal(err)
	}
	claims := e.c.Client.ResourceV1().ResourceClaims(draTenantNS)
	claim := handWrittenClaim("by-hand", draPodUnits)
	claim.Namespace = draTenantNS
	var refusal error
	if err := poll(e.ctx, time.Minute, func() (bool, error) {
		_, refusal = claims.Create(e.ctx, claim, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refusal != nil && strings.Contains(refusal.Error(), "gpushare-dra-claims"), nil
	}); err != nil {
		t.Fatalf("the claims policy never refused a claim written by hand: %v (last: %v)", err, refusal)
	}
	_, err := claims.Create(e.ctx, claim, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "asks gpushare GPU memory") {
		t.Fatalf("a claim written by hand for %s: %v, want refused by gpushare-dra-claims", draconvert.DefaultDeviceClass, err)
	}
	t.Logf("claim written by hand: %v", err)

	template := "gpushare-4gi-0123456789abcdef"
	direct := tenantDRAPod("direct", 0)
	direct.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}}
	direct.Spec.Containers[0].Resources = v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}
	direct.Spec.Containers[0].Env = []v1.EnvVar{{Name: "CUDA_DEVICE_MEMORY_LIMIT_0", Value: "16384m"}}
	pods := e.c.Client.CoreV1().Pods(draTenantNS)
	if err := poll(e.ctx, time.Minute, func() (bool, error) { // the policies take effect one by one
		_, refusal = pods.Create(e.ctx, direct, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return refusal != nil && strings.Contains(refusal.Error(), "gpushare-pod-requests"), nil
	}); err != nil {
		t.Fatalf("the pod-requests policy never refused a pod naming %s itself with a protected env: %v (last: %v)", template, err, refusal)
	}
	_, err = pods.Create(e.ctx, direct, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "gpushare-pod-requests") || !strings.Contains(err.Error(), "CUDA_DEVICE_MEMORY_LIMIT_0") {
		t.Fatalf("a pod naming %s itself with a protected env: %v, want refused by gpushare-pod-requests", template, err)
	}
	t.Logf("pod naming a gpushare template itself: %v", err)

	converted := tenantDRAPod("converted", 3) // a shape no subtest asked: the webhook creates its template now
	got, err := e.c.Client.CoreV1().Pods(draTenantNS).Create(e.ctx, converted, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a gpu-mem pod in %s: %v", draTenantNS, err)
	}
	t.Cleanup(func() {
		if err := e.c.Client.CoreV1().Pods(draTenantNS).Delete(e.ctx, converted.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete pod %s: %v", converted.Name, err)
		}
	})
	if len(got.Spec.ResourceClaims) != 1 || got.Spec.ResourceClaims[0].ResourceClaimTemplateName == nil {
		t.Fatalf("pod %s was not converted: %+v", converted.Name, got.Spec.ResourceClaims)
	}
	name := *got.Spec.ResourceClaims[0].ResourceClaimTemplateName
	tmpl, err := e.c.Client.ResourceV1().ResourceClaimTemplates(draTenantNS).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the webhook's template %s of the converted pod: %v", name, err)
	}
	t.Logf("converted pod: the webhook created template %s under the policy (%s=%s)", tmpl.Name, draconvert.ManagedByLabel, tmpl.Labels[draconvert.ManagedByLabel])
}

// tenantDRAPod is a pod of draTenantNS asking units of gpu-mem (none when 0) as a tenant writes
// it: the RuntimeDefault seccomp profile, no host namespaces, no service account token.
func tenantDRAPod(name string, units int64) *v1.Pod {
	spec := gpuPodSpec("", units)
	if units == 0 {
		spec.Containers[0].Resources = v1.ResourceRequirements{}
	}
	spec.AutomountServiceAccountToken = new(bool)
	spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: draTenantNS}, Spec: spec}
}
