package main

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// TestChartDRAClaimsPolicy: with DRA mode and the admission policies on, the chart renders
// config/dra/claims-policy.yaml for the release's extender account and the DeviceClass of
// dra.driverName, with its binding; with either off, not at all.
func TestChartDRAClaimsPolicy(t *testing.T) {
	tests := []struct {
		name   string
		sets   []string
		want   bool
		driver string
	}{
		{name: "DRA mode, another driver, another namespace", sets: []string{"dra.enabled=true", "dra.webhook.enabled=false", "dra.driverName=gpu.example.com"},
			want: true, driver: "gpu.example.com"},
		{name: "admission policies off", sets: []string{"dra.enabled=true", "dra.webhook.enabled=false", "admission.enabled=false"}},
		{name: "DRA mode off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := mustRender(t, "gpu-system", tt.sets...)
			var policy admissionv1.ValidatingAdmissionPolicy
			var binding admissionv1.ValidatingAdmissionPolicyBinding
			has := objs.Get(t, "ValidatingAdmissionPolicy/gpushare-dra-claims", &policy)
			if has != tt.want || objs.Get(t, "ValidatingAdmissionPolicyBinding/gpushare-dra-claims", &binding) != tt.want {
				t.Fatalf("policy and binding rendered %t, want %t", has, tt.want)
			}
			if !tt.want {
				return
			}
			match := policy.Spec.MatchConditions[0].Expression
			if !strings.Contains(match, "'"+tt.driver+"'") || strings.Contains(match, "'gpushare.aliyun.com'") {
				t.Errorf("match condition %q: want the DeviceClass %s alone", match, tt.driver)
			}
			var user string
			for _, v := range policy.Spec.Variables {
				if v.Name == "extenderUser" {
					user = v.Expression
				}
			}
			if want := "'system:serviceaccount:gpu-system:gpushare-extender'"; user != want {
				t.Errorf("extenderUser %s, want %s (the release's extender account)", user, want)
			}
			if binding.Spec.PolicyName != policy.Name {
				t.Errorf("binding of %q, want %q", binding.Spec.PolicyName, policy.Name)
			}
		})
	}
}
