package wire

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// TestFilterAnswerJSONMatchesResult: the JSON AppendJSON writes from a pass's verdicts decodes
// to what json.Marshal of Result() decodes to, for every shape of answer and every kind of string,
// and lists the failed nodes in the request's order.
func TestFilterAnswerJSONMatchesResult(t *testing.T) {
	var every strings.Builder
	for c := range 256 {
		every.WriteByte(byte(c)) // control characters, quotes, HTML characters, invalid UTF-8
	}
	odd := []string{"", "plain", every.String(), "<script>&</script>", "line\u2028sep\u2029", "é日本\U0001F600", "\xff\xfe", `"quoted" \back\`}
	reasons := make([]*gpumem.FitError, 0, 2*len(odd))
	for _, s := range odd {
		reasons = append(reasons, &gpumem.FitError{Reason: "detail " + s, Summary: s}, &gpumem.FitError{Reason: s, Summary: s, Unresolvable: true})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var bigNames []string
	var bigPassed []bool
	var bigFailures []*gpumem.FitError
	for i := range 3000 {
		bigNames = append(bigNames, fmt.Sprintf("node-%05d", rng.IntN(2000))) // some named twice
		if i%7 == 0 {
			bigPassed, bigFailures = append(bigPassed, true), append(bigFailures, nil)
			continue
		}
		bigPassed, bigFailures = append(bigPassed, false), append(bigFailures, reasons[rng.IntN(len(reasons))])
	}
	names := []string{"n1", odd[2], "n3"}
	nodes := &v1.NodeList{Items: []v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n<1>", Annotations: map[string]string{"a": odd[3]}}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}}
	tests := map[string]*FilterAnswer{
		"no candidates":      {Args: &extenderv1.ExtenderArgs{NodeNames: &[]string{}}},
		"nil names":          {Args: &extenderv1.ExtenderArgs{}},
		"names":              {Args: &extenderv1.ExtenderArgs{NodeNames: &names}, Names: names, Passed: []bool{true, false, true}, Failures: []*gpumem.FitError{nil, reasons[0], nil}},
		"none passes":        {Args: &extenderv1.ExtenderArgs{NodeNames: &names}, Names: names, Passed: nil, Failures: []*gpumem.FitError{reasons[5], reasons[4], reasons[11]}},
		"chosen, no reasons": {Args: &extenderv1.ExtenderArgs{NodeNames: &names}, Names: names, Passed: []bool{false, true, false}},
		"odd strings":        {Args: &extenderv1.ExtenderArgs{NodeNames: &odd}, Names: odd, Passed: make([]bool, len(odd)), Failures: reasons[:len(odd)]},
		"3000 candidates":    {Args: &extenderv1.ExtenderArgs{NodeNames: &bigNames}, Names: bigNames, Passed: bigPassed, Failures: bigFailures},
		"nodes":              {Args: &extenderv1.ExtenderArgs{Nodes: nodes}, Names: []string{"n<1>", "n2"}, Passed: []bool{true, false}, Failures: []*gpumem.FitError{nil, reasons[2]}},
		"error":              {Args: &extenderv1.ExtenderArgs{NodeNames: &names}, Names: names, Err: "filter: request has no pod"},
	}
	for name, a := range tests {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(a.Result())
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			var gotV, wantV any
			if err := json.Unmarshal(got, &gotV); err != nil {
				t.Fatalf("AppendJSON wrote invalid JSON: %v\n%s", err, got)
			}
			if err := json.Unmarshal(want, &wantV); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantV, gotV); diff != "" {
				t.Errorf("AppendJSON decodes differently from Result() (-want,+got):\n%s", diff)
			}
		})
	}
	t.Run("request order", func(t *testing.T) {
		order := []string{"c", "a", "b"}
		a := &FilterAnswer{Args: &extenderv1.ExtenderArgs{NodeNames: &order}, Names: order, Passed: make([]bool, 3), Failures: []*gpumem.FitError{reasons[0], reasons[0], reasons[0]}}
		got, err := a.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := `"FailedNodes":{"c":"","a":"","b":""}`; !strings.Contains(string(got), want) {
			t.Errorf("AppendJSON = %s, want it to contain %s", got, want)
		}
	})
}

// FuzzAppendJSONString: a string is written as json.Marshal writes it.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a", "<&>", "\u2028", "\xff", "\x00\x1f\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}
