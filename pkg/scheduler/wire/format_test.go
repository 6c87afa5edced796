package wire

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// TestEscapeFormat: kube-scheduler's Eventf(msg) prints an escaped message as it was: every "%"
// of a user's value (a model named "A100%d", "50%", a lone "%") survives it.
func TestEscapeFormat(t *testing.T) {
	sprintf := fmt.Sprintf // what kube-scheduler does with the message, as a format
	tests := []struct {
		name, in, want string
	}{
		{name: "no percent", in: "GPU memory: no GPU has 4 GiB free", want: "GPU memory: no GPU has 4 GiB free"},
		{name: "a verb", in: "GPU model: no healthy GPU of model A100%d", want: "GPU model: no healthy GPU of model A100%%d"},
		{name: "a lone percent at the end", in: "50%", want: "50%%"},
		{name: "an escaped percent", in: "%%s %v", want: "%%%%s %%v"},
		{name: "empty", in: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EscapeFormat(tt.in)
			if got != tt.want {
				t.Errorf("EscapeFormat(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if printed := sprintf(got); printed != tt.in {
				t.Errorf("kube-scheduler would print %q, want %q", printed, tt.in)
			}
		})
	}
}

// TestFilterAnswerEscapesReasons: the reasons and Error filter answers carry their "%" doubled,
// in Result and in the JSON AppendJSON writes.
func TestFilterAnswerEscapesReasons(t *testing.T) {
	names := []string{"n1", "n2"}
	args := &extenderv1.ExtenderArgs{NodeNames: &names}
	failures := []*gpumem.FitError{{Summary: "model A100%d"}, {Summary: "100% used", Unresolvable: true}}
	a := &FilterAnswer{Args: args, Names: names, Passed: []bool{false, false}, Failures: failures}
	want := &extenderv1.ExtenderFilterResult{NodeNames: &[]string{}, FailedNodes: extenderv1.FailedNodesMap{"n1": "model A100%%d"},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"n2": "100%% used"}}
	if diff := cmp.Diff(want, a.Result()); diff != "" {
		t.Errorf("Result() (-want,+got):\n%s", diff)
	}
	raw, err := a.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got extenderv1.ExtenderFilterResult
	if err := Decode(raw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Errorf("AppendJSON() (-want,+got):\n%s", diff)
	}
	e := &FilterAnswer{Args: args, Names: names, Err: "pod asks model %s"}
	if got := e.Result().Error; got != "pod asks model %%s" {
		t.Errorf("Result().Error = %q, want the %% doubled", got)
	}
}
