package config_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// TestAdmissionPolicies checks the shipped admission policies against the contract and the RBAC
// (test/e2e's TestAdmission runs them on a real API server): each file holds one policy and its
// binding, both deny, the service accounts are those of the RBAC and the names and limits are
// the contract's defaults.
func TestAdmissionPolicies(t *testing.T) {
	placement := []string{contract.AnnotationIndex, contract.AnnotationPod, contract.AnnotationDev,
		contract.AnnotationAssigned, contract.AnnotationAssumeTime, contract.AnnotationAllocation}
	plugin := []string{contract.AnnotationAssigned, contract.AnnotationAllocation, contract.AnnotationIndex, contract.AnnotationDev}
	for _, tc := range []struct {
		name    string
		file    string
		account string // the RBAC file whose ServiceAccount the policy is for, if any
		want    map[string][]string
		match   []string // names the matchConditions must also carry (they cannot read variables)
	}{
		{"extender", "admission/extender-pods.yaml", "extender/rbac.yaml", map[string][]string{"placementAnnotations": placement, "preemptionAnnotation": {contract.DefaultPreemptionKey},
			"fenceAnnotation": {contract.AnnotationFence}, "preemptedByAnnotation": {contract.AnnotationPreemptedBy}, "resource": {contract.DefaultResourceName},
			"protectedPriority": {strconv.Itoa(int(preempt.ProtectedPriority))}}, nil},
		{"extender-fence", "admission/extender-fence.yaml", "extender/rbac.yaml", map[string][]string{"fenceAnnotation": {contract.AnnotationFence},
			"fencedAnnotations": append([]string{contract.AnnotationFence, contract.DefaultPreemptionKey, contract.AnnotationPreemptedBy}, placement...)}, nil},
		{"extender-leases", "admission/extender-leases.yaml", "extender/rbac.yaml", map[string][]string{"leaseName": {server.DefaultElectionConfig().Name}}, nil},
		{"share-plugin-pods", "admission/share-plugin-pods.yaml", "share-plugin/rbac.yaml", map[string][]string{"pluginAnnotations": plugin}, nil},
		{"share-plugin-nodes", "admission/share-plugin-nodes.yaml", "share-plugin/rbac.yaml", map[string][]string{
			"inventoryAnnotation": {contract.DefaultNodeGPUsKey}, "countResource": {contract.DefaultCountName}}, nil},
		{"pod-requests", "admission/pod-requests.yaml", "", map[string][]string{
			"resource":             {contract.DefaultResourceName},
			"countKey":             {contract.DefaultGPUsPerContainer},
			"modelKey":             {contract.DefaultModelKey},
			"coreKey":              {contract.DefaultCoreKey},
			"preemptionKey":        {contract.DefaultPreemptionKey},
			"maxUnitsPerContainer": {strconv.Itoa(contract.MaxUnitsPerContainer)},
			"maxGPUs":              {strconv.Itoa(contract.MaxGPUsPerContainer)},
			"maxModels":            {strconv.Itoa(contract.MaxModelEntries)},
			"maxModelEntryLength":  {strconv.Itoa(contract.MaxModelEntryLength)},
		}, []string{contract.DefaultResourceName, contract.DefaultGPUsPerContainer, contract.DefaultModelKey, contract.DefaultCoreKey, contract.DefaultPreemptionKey,
			draconvert.AnnotationConverted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy, binding := readPolicy(t, tc.file)
			if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionv1.Fail {
				t.Errorf("failurePolicy %v, want Fail", policy.Spec.FailurePolicy)
			}
			if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
				t.Errorf("binding %+v, want policy %s with [Deny]", binding.Spec, policy.Name)
			}
			for v, want := range tc.want {
				if diff := cmp.Diff(want, variableLiterals(t, policy, v)); diff != "" {
					t.Errorf("variable %s (-want,+got):\n%s", v, diff)
				}
			}
			match := tc.match
			if tc.account != "" {
				match = append(match, "system:serviceaccount:"+serviceAccount(t, tc.account))
			}
			for _, m := range match {
				if len(policy.Spec.MatchConditions) != 1 || !strings.Contains(policy.Spec.MatchConditions[0].Expression, "'"+m+"'") {
					t.Errorf("matchConditions %+v do not name %s", policy.Spec.MatchConditions, m)
				}
			}
		})
	}
}

// readPolicy decodes, strictly, the policy and the binding of file.
func readPolicy(t testing.TB, file string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%s: %d documents, want a policy and its binding", file, len(docs))
	}
	var p admissionv1.ValidatingAdmissionPolicy
	var b admissionv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &p); err != nil || p.Kind != "ValidatingAdmissionPolicy" {
		t.Fatalf("%s: policy %q: %v", file, p.Kind, err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &b); err != nil || b.Kind != "ValidatingAdmissionPolicyBinding" {
		t.Fatalf("%s: binding %q: %v", file, b.Kind, err)
	}
	return &p, &b
}

// variableLiterals returns the quoted strings of the named variable's expression, or the
// expression itself when it has none (a number).
func variableLiterals(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy, name string) []string {
	t.Helper()
	for _, v := range p.Spec.Variables {
		if v.Name != name {
			continue
		}
		var out []string
		for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(v.Expression, -1) {
			out = append(out, m[1])
		}
		if out == nil {
			out = []string{strings.TrimSpace(v.Expression)}
		}
		return out
	}
	t.Fatalf("policy %s has no variable %s", p.Name, name)
	return nil
}

// serviceAccount returns "namespace:name" of the ServiceAccount in an RBAC file.
func serviceAccount(t *testing.T, file string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "ServiceAccount" {
			return obj.Metadata.Namespace + ":" + obj.Metadata.Name
		}
	}
	t.Fatalf("%s has no ServiceAccount", file)
	return ""
}

// TestModelLengthsInBytes: the pod-requests policy measures gpu-model entries as the extender
// does, in UTF-8 bytes (contract.ParseRequest refuses a 64-character, 127-byte entry); CEL's
// size of a string counts characters, so every length of the model value must go through
// bytes(). A policy counting characters admitted that entry and the pod then stayed Pending.
func TestModelLengthsInBytes(t *testing.T) {
	entry := "A" + strings.Repeat("é", contract.MaxModelEntryLength-1) // 64 characters, 127 bytes
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.DefaultModelKey: entry}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{contract.DefaultResourceName: resource.MustParse("4")}}}}}}
	names := contract.DefaultNames()
	if _, err := contract.ParseRequest(pod, &names); err == nil {
		t.Fatalf("the extender accepts a model entry of %d characters and %d bytes; this test assumes it counts bytes", utf8.RuneCountInString(entry), len(entry))
	}
	policy, _ := readPolicy(t, "admission/pod-requests.yaml")
	exprs := map[string]string{}
	for _, v := range policy.Spec.Variables {
		exprs[v.Name] = v.Expression
	}
	for _, tc := range []struct{ variable, want, notWant string }{
		{"modelTooLong", "size(bytes(variables.model)) >", "size(variables.model) >"},
		{"modelProblems", "size(bytes(e)) > variables.maxModelEntryLength", "size(e) > variables.maxModelEntryLength"},
	} {
		if got := exprs[tc.variable]; !strings.Contains(got, tc.want) || strings.Contains(got, tc.notWant) {
			t.Errorf("variable %s = %q, want it to measure bytes (%q), not characters (%q)", tc.variable, got, tc.want, tc.notWant)
		}
	}
}
