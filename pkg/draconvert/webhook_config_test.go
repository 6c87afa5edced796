package draconvert_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/draconvert"
)

// The shipped webhook configuration (config/dra/webhook.yaml) against the code it configures:
// the extender's Service and account, the handler's route and labels, and its match
// conditions compiled and evaluated with kube-apiserver's own machinery.

const webhookFile = "../../config/dra/webhook.yaml"

// readDocs decodes the YAML documents of file into the objects of out, by kind.
func readDocs(t *testing.T, file string, out map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(raw), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if obj, ok := out[meta.Kind]; ok {
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s: %s: %v", file, meta.Kind, err)
			}
		}
	}
}

func readWebhook(t *testing.T) (*admissionregv1.MutatingWebhookConfiguration, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	t.Helper()
	cfg, role, binding := &admissionregv1.MutatingWebhookConfiguration{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}
	readDocs(t, webhookFile, map[string]any{"MutatingWebhookConfiguration": cfg, "ClusterRole": role, "ClusterRoleBinding": binding})
	if len(cfg.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(cfg.Webhooks))
	}
	return cfg, role, binding
}

func TestWebhookConfigTargetsTheExtender(t *testing.T) {
	cfg, role, binding := readWebhook(t)
	svc, account := &v1.Service{}, &v1.ServiceAccount{}
	readDocs(t, "../../config/extender/deployment.yaml", map[string]any{"Service": svc})
	readDocs(t, "../../config/extender/rbac.yaml", map[string]any{"ServiceAccount": account})
	wh := cfg.Webhooks[0]
	want := &admissionregv1.ServiceReference{Namespace: svc.Namespace, Name: svc.Name, Port: &svc.Spec.Ports[0].Port, Path: new(draconvert.Path)}
	if diff := cmp.Diff(want, wh.ClientConfig.Service); diff != "" {
		t.Errorf("service (-want,+got):\n%s", diff)
	}
	got := []string{string(*wh.FailurePolicy), string(*wh.SideEffects), string(*wh.ReinvocationPolicy), strings.Join(wh.AdmissionReviewVersions, ",")}
	if diff := cmp.Diff([]string{"Fail", "NoneOnDryRun", "Never", "v1"}, got); diff != "" {
		t.Errorf("failurePolicy, sideEffects, reinvocationPolicy, admissionReviewVersions (-want,+got):\n%s", diff)
	}
	rule := admissionregv1.RuleWithOperations{Operations: []admissionregv1.OperationType{admissionregv1.Create},
		Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: new(admissionregv1.NamespacedScope)}}
	if diff := cmp.Diff([]admissionregv1.RuleWithOperations{rule}, wh.Rules); diff != "" {
		t.Errorf("rules (-want,+got):\n%s", diff)
	}
	// RBAC: what the handler calls, for the extender's account.
	for _, need := range []struct{ group, resource, verb string }{
		{"", "namespaces", "get"}, {"resource.k8s.io", "resourceclaimtemplates", "get"}, {"resource.k8s.io", "resourceclaimtemplates", "create"},
	} {
		if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, need.group) && slices.Contains(r.Resources, need.resource) && slices.Contains(r.Verbs, need.verb)
		}) {
			t.Errorf("ClusterRole %s does not allow %s %s", role.Name, need.verb, need.resource)
		}
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: account.Name, Namespace: account.Namespace}
	if binding.RoleRef.Name != role.Name || !slices.Contains(binding.Subjects, subject) {
		t.Errorf("binding %+v does not give %s to %+v", binding, role.Name, subject)
	}
}

func TestWebhookConfigSelectors(t *testing.T) {
	cfg, _, _ := readWebhook(t)
	wh := cfg.Webhooks[0]
	nsSel, err := metav1.LabelSelectorAsSelector(wh.NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	objSel, err := metav1.LabelSelectorAsSelector(wh.ObjectSelector)
	if err != nil {
		t.Fatal(err)
	}
	optOut := map[string]string{draconvert.ModeLabel: draconvert.ModeDevicePlugin}
	tests := []struct {
		name      string
		selector  labels.Selector
		labels    map[string]string
		wantMatch bool
	}{
		{"namespace", nsSel, map[string]string{v1.LabelMetadataName: testNamespace}, true},
		{"kube-system", nsSel, map[string]string{v1.LabelMetadataName: metav1.NamespaceSystem}, false},
		{"namespace opted out", nsSel, map[string]string{v1.LabelMetadataName: testNamespace, draconvert.ModeLabel: draconvert.ModeDevicePlugin}, false},
		{"namespace in DRA mode", nsSel, map[string]string{v1.LabelMetadataName: testNamespace, draconvert.ModeLabel: "dra"}, true},
		{"pod", objSel, map[string]string{"app": "x"}, true},
		{"pod without labels", objSel, nil, true},
		{"pod opted out", objSel, optOut, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.selector.Matches(labels.Set(tt.labels)); got != tt.wantMatch {
				t.Errorf("selector %s matches %v: %v, want %v", tt.selector, tt.labels, got, tt.wantMatch)
			}
		})
	}
}

func TestWebhookConfigMatchConditions(t *testing.T) {
	cfg, _, _ := readWebhook(t)
	wh := cfg.Webhooks[0]
	var exprs []plugincel.ExpressionAccessor
	for _, c := range wh.MatchConditions {
		exprs = append(exprs, &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression})
	}
	compiler := plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	vars := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"gpu-mem in limits", makePod(app("main", 4)), true},
		{"gpu-mem in requests only", makePod(app("main", 0, requests(4))), true},
		{"gpu-mem in an init container", makePod(initApp("warm", 2), app("main", 0)), true},
		{"no gpu-mem", makePod(app("main", 0)), false},
		{"no resources at all", makePod(func(p *v1.Pod) { p.Spec.Containers = []v1.Container{{Name: "main", Image: "busybox"}} }), false},
		{"mirror pod", makePod(app("main", 4), annotate(v1.MirrorPodAnnotationKey, "x")), false},
		{"no annotations", makePod(app("main", 4), func(p *v1.Pod) { p.Annotations = nil }), true},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	noOpinion := authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionNoOpinion, "", nil
	})
	// Webhook match conditions run as stored expressions and are validated as new ones.
	for envName, env := range map[string]environment.Type{"stored": environment.StoredExpressions, "new": environment.NewExpressions} {
		matcher := matchconditions.NewMatcher(compiler.CompileCondition(exprs, vars, env), wh.FailurePolicy, "webhook", "admit", wh.Name)
		for _, tt := range tests {
			t.Run(envName+"/"+tt.name, func(t *testing.T) {
				pod := tt.pod.DeepCopy()
				gvk := v1.SchemeGroupVersion.WithKind("Pod")
				pod.SetGroupVersionKind(gvk)
				attrs := admission.NewAttributesRecord(pod, nil, gvk, pod.Namespace, pod.Name, v1.SchemeGroupVersion.WithResource("pods"), "",
					admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
				versioned, err := admission.NewVersionedAttributes(attrs, gvk, admission.NewObjectInterfacesFromScheme(scheme))
				if err != nil {
					t.Fatal(err)
				}
				res := matcher.Match(t.Context(), versioned, nil, noOpinion)
				if res.Error != nil || res.Matches != tt.want {
					t.Errorf("match conditions on %s: %+v, want matches %v", tt.name, res, tt.want)
				}
			})
		}
	}
}
