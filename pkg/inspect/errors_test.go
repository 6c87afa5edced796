package inspect_test

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/inspect"
	st "github.com/gpushare/gpushare/pkg/inspect/testing"
)

func TestErrors(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		forbid    string // resource whose list/get the fake API server refuses
		wantErr   error
		wantInMsg string
	}{
		{name: "unknown node", args: []string{"node-a", "nope"}, wantErr: inspect.ErrUnknownNode, wantInMsg: `node "nope" not found`},
		{name: "node without GPUs", args: []string{"node-cpu"}, wantErr: inspect.ErrNotSharing, wantInMsg: "node-cpu"},
		{name: "pods forbidden", forbid: "pods", wantErr: inspect.ErrForbidden, wantInMsg: "may not list pods in all namespaces"},
		{name: "nodes forbidden", forbid: "nodes", wantErr: inspect.ErrForbidden, wantInMsg: "may not list nodes at cluster scope"},
		{name: "named node forbidden", args: []string{"node-a"}, forbid: "nodes", wantErr: inspect.ErrForbidden, wantInMsg: `may not get nodes (node "node-a")`},
		{name: "bad output", args: []string{"-o", "xml"}, wantErr: inspect.ErrInvalidOptions, wantInMsg: `--output "xml"`},
		{name: "bad unit", args: []string{"--unit", "1Ki"}, wantErr: inspect.ErrInvalidOptions, wantInMsg: "unit"},
		{name: "empty DRA driver", args: []string{"--dra-driver", ""}, wantErr: inspect.ErrInvalidOptions, wantInMsg: "--dra-driver"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(st.Cluster()...)
			if tc.forbid != "" {
				client.PrependReactor("*", tc.forbid, func(a k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: tc.forbid}, "", errors.New("RBAC: access denied"))
				})
			}
			_, ctx := ktesting.NewTestContext(t)
			streams, _, _, _ := genericiooptions.NewTestIOStreams()
			cmd := inspect.NewCmd(streams, inspect.WithClient(client))
			cmd.SetArgs(append([]string{}, tc.args...))
			err := cmd.ExecuteContext(ctx)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantInMsg)
			}
		})
	}
}
