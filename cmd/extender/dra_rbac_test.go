package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestDRAModeRBAC: config/dra/extender-rbac.yaml grants the extender's service account (the one
// config/extender/rbac.yaml makes) what --dra-mode reads and nothing else: list and watch of
// ResourceSlices and ResourceClaims (its informers and its audit). TestDRAFragmentedNodeChoice
// runs the extender under it.
func TestDRAModeRBAC(t *testing.T) {
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	raw, err := os.ReadFile("../../config/dra/extender-rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "ClusterRole":
			err = yaml.UnmarshalStrict([]byte(doc), &role)
		case "ClusterRoleBinding":
			err = yaml.UnmarshalStrict([]byte(doc), &binding)
		default:
			t.Fatalf("unexpected %s in config/dra/extender-rbac.yaml", meta.Kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices", "resourceclaims"}, Verbs: []string{"list", "watch"}}}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("rules (-want,+got):\n%s", diff)
	}
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "gpushare-extender", Namespace: "kube-system"}}
	if binding.RoleRef.Name != role.Name || !cmp.Equal(wantSubjects, binding.Subjects) {
		t.Errorf("binding %s of %+v: want %s bound to %+v (config/extender/rbac.yaml's account)", binding.RoleRef.Name, binding.Subjects, role.Name, wantSubjects)
	}
}
