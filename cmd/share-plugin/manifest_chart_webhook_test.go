package main

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

// TestChartDRAWebhook: with DRA mode and its webhook on, the chart's webhook calls the
// release's extender Service, on its HTTPS port, at the route the extender serves, trusting
// the CA given; the extender serves it (--dra-webhook) under config/dra's RBAC for it; the
// match conditions name the contract's resource. Otherwise neither is there.
func TestChartDRAWebhook(t *testing.T) {
	on := []string{"dra.enabled=true", "dra.webhook.caBundle=" + chartCA}
	tests := []struct {
		name     string
		ns       string
		sets     []string
		webhook  bool
		resource string
	}{
		{name: "on", ns: "kube-system", sets: on, webhook: true, resource: "aliyun.com/gpu-mem"},
		{name: "on, another namespace, port and resource", ns: "gpu-system", webhook: true, resource: "example.com/vram",
			sets: append([]string{"extender.port=8443", "contract.resourceName=example.com/vram"}, on...)},
		{name: "webhook off: no CA needed", ns: "kube-system", sets: []string{"dra.enabled=true", "dra.webhook.enabled=false"}},
		{name: "DRA off", ns: "kube-system", sets: []string{"dra.webhook.enabled=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := mustRender(t, tt.ns, tt.sets...)
			var cfg admissionregv1.MutatingWebhookConfiguration
			var ext appsv1.Deployment
			if !objs.Get(t, "Deployment/gpushare-extender", &ext) {
				t.Fatalf("no extender Deployment: %v", keys(objs))
			}
			has := objs.Get(t, "MutatingWebhookConfiguration/gpushare-dra", &cfg)
			serves := slices.Contains(ext.Spec.Template.Spec.Containers[0].Args, "--dra-webhook")
			if has != tt.webhook || serves != tt.webhook {
				t.Fatalf("webhook configuration %t, extender --dra-webhook %t; want %t", has, serves, tt.webhook)
			}
			if tt.webhook {
				checkChartWebhookTarget(t, objs, &cfg, tt.ns, tt.resource)
				checkChartWebhookRBAC(t, objs, ext.Spec.Template.Spec.ServiceAccountName, tt.ns)
			}
		})
	}
}

// checkChartWebhookTarget: the webhook calls the extender's Service at its HTTPS port and
// draconvert.Path, trusting chartCA, for pods that ask resource.
func checkChartWebhookTarget(t *testing.T, objs chartObjects, cfg *admissionregv1.MutatingWebhookConfiguration, ns, resource string) {
	t.Helper()
	var svc v1.Service
	if !objs.Get(t, "Service/gpushare-extender", &svc) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "https" {
		t.Fatalf("no extender Service whose one port is the container's https: %+v", svc.Spec)
	}
	if len(cfg.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(cfg.Webhooks))
	}
	cc := cfg.Webhooks[0].ClientConfig
	want := admissionregv1.ServiceReference{Namespace: ns, Name: svc.Name, Path: new(draconvert.Path), Port: &svc.Spec.Ports[0].Port}
	if cc.Service == nil || cc.URL != nil {
		t.Fatalf("clientConfig %+v, want the extender's Service", cc)
	}
	if diff := cmp.Diff(want, *cc.Service); diff != "" {
		t.Errorf("webhook Service (-want,+got):\n%s", diff)
	}
	if ca, _ := base64.StdEncoding.DecodeString(chartCA); string(cc.CABundle) != string(ca) {
		t.Errorf("caBundle %q, want dra.webhook.caBundle's %q", cc.CABundle, ca)
	}
	var asks string
	for _, mc := range cfg.Webhooks[0].MatchConditions {
		if mc.Name == "asks-gpu-mem" {
			asks = mc.Expression
		}
	}
	other := string(contract.DefaultResourceName)
	if !strings.Contains(asks, "'"+resource+"'") || (resource != other && strings.Contains(asks, "'"+other+"'")) {
		t.Errorf("match condition asks-gpu-mem %q, want it to name %s alone", asks, resource)
	}
}

// checkChartWebhookRBAC: the extender's account gets config/dra/webhook.yaml's ClusterRole.
func checkChartWebhookRBAC(t *testing.T, objs chartObjects, account, ns string) {
	t.Helper()
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	if !objs.Get(t, "ClusterRoleBinding/gpushare-extender-dra-webhook", &binding) || !objs.Get(t, "ClusterRole/"+binding.RoleRef.Name, &role) {
		t.Fatalf("the render lacks the webhook's ClusterRoleBinding or its ClusterRole: %v", keys(objs))
	}
	if diff := cmp.Diff([]rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}}, binding.Subjects); diff != "" {
		t.Errorf("ClusterRoleBinding subjects (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(configClusterRole(t, "../../config/dra/webhook.yaml").Rules, role.Rules); diff != "" {
		t.Errorf("ClusterRole rules, against config/dra/webhook.yaml's (-want,+got):\n%s", diff)
	}
}

// TestChartDRARefusesBadValues: the render fails, saying what to set, without a CA for the
// webhook or with one that is not a base64 PEM certificate (a webhook the API server could not
// trust would refuse every gpu-mem pod; helm template cannot read the extender's TLS Secret),
// and with a driver name kubelet would refuse.
func TestChartDRARefusesBadValues(t *testing.T) {
	tests := []struct {
		name    string
		sets    []string
		message string
	}{
		{name: "no CA", sets: []string{"dra.enabled=true"}, message: "dra.webhook.caBundle: set it"},
		{name: "not a certificate", sets: []string{"dra.enabled=true", "dra.webhook.caBundle=" + base64.StdEncoding.EncodeToString([]byte("not a cert"))},
			message: "not the base64 of a PEM certificate"},
		{name: "driver name not a DNS subdomain", sets: []string{"dra.enabled=true", "dra.webhook.enabled=false", "dra.driverName=GPU_share"},
			message: "must be a DNS subdomain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(t, "kube-system", tt.sets...)
			if err == nil || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("render error %v, want one saying %q", err, tt.message)
			}
		})
	}
}
