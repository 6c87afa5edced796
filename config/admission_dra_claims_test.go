package config_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

const draClaimsPolicy = "dra/claims-policy.yaml"

// The users that make gpushare claims: the webhook (the extender's account) writes templates,
// kube-controller-manager's resource claim controller makes claims from them.
const (
	claimControllerUser = "system:serviceaccount:kube-system:resource-claim-controller"
	managerUser         = "system:kube-controller-manager"
)

// deviceClaimSpec asks one device of class, with 4 GiB of memory, directly or (firstAvailable)
// as the second of two alternatives.
func deviceClaimSpec(class string, firstAvailable bool) resourceapi.ResourceClaimSpec {
	if firstAvailable {
		return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "other", DeviceClassName: "other.example.com"}, {Name: "ours", DeviceClassName: class}}}}}}
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, Count: 1, AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}
}

// claimCreate is the CREATE of a ResourceClaim (template false) or ResourceClaimTemplate named
// name asking spec, by username in namespace ns (default when nil).
func claimCreate(name string, template bool, spec resourceapi.ResourceClaimSpec, username string, ns *v1.Namespace) admissionRequest {
	meta := metav1.ObjectMeta{Name: name, Namespace: "default"}
	var obj runtime.Object = &resourceapi.ResourceClaim{ObjectMeta: meta, Spec: spec}
	resource := resourceapi.SchemeGroupVersion.WithResource("resourceclaims")
	if template {
		obj = &resourceapi.ResourceClaimTemplate{ObjectMeta: meta, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec}}
		resource = resourceapi.SchemeGroupVersion.WithResource("resourceclaimtemplates")
	}
	return admissionRequest{resource: resource, object: obj, username: username, namespace: ns}
}

// TestDRAClaimsPolicyCEL: a claim or template asking gpushare's DeviceClass comes from the
// conversion only: templates from the extender's account and named gpushare-*, claims from
// kube-controller-manager's resource claim controller. Anyone else's is refused, directly or
// as a firstAvailable alternative; other classes and exempt namespaces are not evaluated.
func TestDRAClaimsPolicyCEL(t *testing.T) {
	ours, other := deviceClaimSpec(draconvert.DefaultDeviceClass, false), deviceClaimSpec("other.example.com", false)
	exempt := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{exemptLabel: "true"}}}
	runPolicyCases(t, draClaimsPolicy, []policyCase{
		{name: "the webhook's template", req: claimCreate("gpushare-4gi-0f3a", true, ours, extenderUser, nil), allowed: true},
		{name: "the extender's template not named gpushare-*", req: claimCreate("mine", true, ours, extenderUser, nil),
			message: []string{"ResourceClaimTemplate mine", "conversion webhook"}},
		{name: "a tenant's template named gpushare-*", req: claimCreate("gpushare-4gi-0f3a", true, ours, ordinaryUser, nil),
			message: []string{"ResourceClaimTemplate gpushare-4gi-0f3a", contract.DefaultResourceName}},
		{name: "a claim from a template (the controller's account)", req: claimCreate("p-gpushare-0-abcde", false, ours, claimControllerUser, nil), allowed: true},
		{name: "a claim from a template (kube-controller-manager's user)", req: claimCreate("p-gpushare-0-abcde", false, ours, managerUser, nil), allowed: true},
		{name: "a tenant's claim", req: claimCreate("mine", false, ours, ordinaryUser, nil), message: []string{"ResourceClaim mine", "templates only"}},
		{name: "a tenant's claim, gpushare as the second alternative", req: claimCreate("mine", false, deviceClaimSpec(draconvert.DefaultDeviceClass, true), ordinaryUser, nil),
			message: []string{"ResourceClaim mine"}},
		{name: "the extender's claim", req: claimCreate("mine", false, ours, extenderUser, nil), message: []string{"ResourceClaim mine"}},
		{name: "another class", req: claimCreate("mine", false, other, ordinaryUser, nil), allowed: true},
		{name: "another class's template", req: claimCreate("mine", true, other, ordinaryUser, nil), allowed: true},
		{name: "an exempt namespace", req: claimCreate("mine", false, ours, ordinaryUser, exempt), allowed: true},
	})
}
