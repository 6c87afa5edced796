package inspect_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/inspect"
	st "github.com/gpushare/gpushare/pkg/inspect/testing"
)

// TestFetchSelectors checks which API calls are made: one list of bound non-terminal pods for
// the whole cluster, and only field-selected pod lists when nodes are named.
func TestFetchSelectors(t *testing.T) {
	tests := []struct {
		name  string
		nodes []string
		want  []string
	}{
		{name: "all nodes", want: []string{
			"list nodes ",
			"list pods spec.nodeName!=,status.phase!=Failed,status.phase!=Succeeded",
		}},
		{name: "named nodes", nodes: []string{"node-b", "node-a"}, want: []string{
			"get nodes node-b",
			"list pods spec.nodeName=node-b,status.phase!=Failed,status.phase!=Succeeded",
			"get nodes node-a",
			"list pods spec.nodeName=node-a,status.phase!=Failed,status.phase!=Succeeded",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := fake.NewClientset(st.Cluster()...)
			if _, _, err := inspect.Fetch(ctx, client, tc.nodes); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, describe(client.Actions())); diff != "" {
				t.Errorf("API calls (-want,+got):\n%s", diff)
			}
		})
	}
}

// describe renders API calls as "verb resource selector-or-name".
func describe(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		s := a.GetVerb() + " " + a.GetResource().Resource + " "
		switch a := a.(type) {
		case k8stesting.ListAction:
			s += a.GetListRestrictions().Fields.String()
		case k8stesting.GetAction:
			s += a.GetName()
		}
		out = append(out, s)
	}
	return out
}
