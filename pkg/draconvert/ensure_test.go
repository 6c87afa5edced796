package draconvert_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

// templatesOf converts pod and returns its templates.
func templatesOf(t *testing.T, opts ...podOption) []*resourcev1.ResourceClaimTemplate {
	t.Helper()
	cfg := draconvert.DefaultConfig(contract.DefaultNames())
	conv, err := draconvert.Convert(makePod(opts...), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conv.Templates()
}

// stored is tmpl as it would be stored in namespace ns.
func stored(tmpl *resourcev1.ResourceClaimTemplate, ns string) *resourcev1.ResourceClaimTemplate {
	s := tmpl.DeepCopy()
	s.Namespace = ns
	return s
}

// verbs lists the verbs of the actions on claim templates, e.g. "get,create".
func verbs(client *fake.Clientset) string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "resourceclaimtemplates" {
			out = append(out, a.GetVerb())
		}
	}
	return strings.Join(out, ",")
}

// ensureCase is a state of the API server in which Ensure makes two templates exist.
type ensureCase struct {
	name      string
	existing  []runtime.Object
	reactor   func(client *fake.Clientset) k8stesting.ReactionFunc
	want      error // wrapped by Ensure's error; nil: success
	wantVerbs string
	wantStore []*resourcev1.ResourceClaimTemplate // what the namespace holds after
}

func ensureCases(two []*resourcev1.ResourceClaimTemplate, dead error) []ensureCase {
	conflicting := stored(two[0], testNamespace)
	conflicting.Spec.Spec.Devices.Requests[0].Exactly.Count = 3
	return []ensureCase{
		{
			name:      "missing: created",
			wantVerbs: "get,list,create,get,list,create",
			wantStore: []*resourcev1.ResourceClaimTemplate{stored(two[0], testNamespace), stored(two[1], testNamespace)},
		},
		{
			name:      "existing: reused",
			existing:  []runtime.Object{stored(two[0], testNamespace), stored(two[1], testNamespace)},
			wantVerbs: "get,get",
			wantStore: []*resourcev1.ResourceClaimTemplate{stored(two[0], testNamespace), stored(two[1], testNamespace)},
		},
		{
			name:      "same name in another namespace: created here",
			existing:  []runtime.Object{stored(two[0], "team-b")},
			wantVerbs: "get,list,create,get,list,create",
			wantStore: []*resourcev1.ResourceClaimTemplate{stored(two[0], testNamespace), stored(two[1], testNamespace)},
		},
		{
			name:      "existing with another spec: refused, untouched",
			existing:  []runtime.Object{conflicting},
			want:      draconvert.ErrTemplateConflict,
			wantVerbs: "get",
			wantStore: []*resourcev1.ResourceClaimTemplate{conflicting},
		},
		{
			name: "created meanwhile by another admission: reused",
			reactor: func(client *fake.Clientset) k8stesting.ReactionFunc {
				return func(a k8stesting.Action) (bool, runtime.Object, error) {
					obj := a.(k8stesting.CreateAction).GetObject()
					if err := client.Tracker().Add(obj); err != nil {
						return true, nil, err
					}
					name := obj.(*resourcev1.ResourceClaimTemplate).Name
					return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaimtemplates"}, name)
				}
			},
			wantVerbs: "get,list,create,get,get,list,create,get",
			wantStore: []*resourcev1.ResourceClaimTemplate{stored(two[0], testNamespace), stored(two[1], testNamespace)},
		},
		{
			name: "API server gone: the error, nothing written",
			reactor: func(*fake.Clientset) k8stesting.ReactionFunc {
				return func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, dead }
			},
			want:      dead,
			wantVerbs: "get,list,create",
		},
	}
}

func TestEnsure(t *testing.T) {
	two := templatesOf(t, app("a", 4), app("b", 6))
	dead := apierrors.NewServiceUnavailable("etcd is gone")
	for _, tt := range ensureCases(two, dead) {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.existing...)
			if tt.reactor != nil {
				client.PrependReactor("create", "resourceclaimtemplates", tt.reactor(client))
			}
			err := draconvert.NewTemplateEnsurer(client, 0).Ensure(t.Context(), testNamespace, two)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("Ensure = %v, want %v", err, tt.want)
			}
			if got := verbs(client); got != tt.wantVerbs {
				t.Errorf("calls %q, want %q", got, tt.wantVerbs)
			}
			list, err := client.ResourceV1().ResourceClaimTemplates(testNamespace).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []*resourcev1.ResourceClaimTemplate
			for i := range list.Items {
				got = append(got, &list.Items[i])
			}
			// What the API server adds is not the ensurer's business.
			ignore := cmp.Options{cmpopts.IgnoreTypes(metav1.TypeMeta{}), cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields", "ResourceVersion")}
			if diff := cmp.Diff(tt.wantStore, got, quantities(), ignore); diff != "" {
				t.Errorf("templates in %s (-want,+got):\n%s", testNamespace, diff)
			}
		})
	}
}

// TestEnsureStopsAtFirstError: the second template fails; the first, whole, stays for a retry.
func TestEnsureStopsAtFirstError(t *testing.T) {
	two := templatesOf(t, app("a", 4), app("b", 6))
	client := fake.NewClientset()
	client.PrependReactor("create", "resourceclaimtemplates", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*resourcev1.ResourceClaimTemplate).Name == two[1].Name {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "resourceclaimtemplates"}, two[1].Name, errors.New("no RBAC"))
		}
		return false, nil, nil
	})
	err := draconvert.NewTemplateEnsurer(client, 0).Ensure(t.Context(), testNamespace, two)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), two[1].Name) {
		t.Fatalf("Ensure = %v, want the Forbidden error naming %s", err, two[1].Name)
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(testNamespace).Get(t.Context(), two[0].Name, metav1.GetOptions{}); err != nil {
		t.Errorf("first template: %v", err)
	}
}

// TestCheck: the dry run's check reads, refuses what Ensure would refuse, and writes nothing.
func TestCheck(t *testing.T) {
	two := templatesOf(t, app("a", 4), app("b", 6))
	conflicting := stored(two[1], testNamespace)
	conflicting.Spec.Spec.Devices.Requests[0].Exactly.Count = 3
	tests := []struct {
		name     string
		existing []runtime.Object
		dead     bool
		want     error
	}{
		{name: "missing: fine, not created"},
		{name: "existing: fine", existing: []runtime.Object{stored(two[0], testNamespace)}},
		{name: "another spec: refused", existing: []runtime.Object{conflicting}, want: draconvert.ErrTemplateConflict},
		{name: "API server gone: refused", dead: true, want: apierrors.NewServiceUnavailable("etcd is gone")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.existing...)
			if tt.dead {
				client.PrependReactor("get", "resourceclaimtemplates", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tt.want })
			}
			err := draconvert.NewTemplateEnsurer(client, 0).Check(t.Context(), testNamespace, two)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
			if v := verbs(client); strings.Contains(v, "create") {
				t.Errorf("calls %q: a dry run created", v)
			}
		})
	}
}
