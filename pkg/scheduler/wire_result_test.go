package scheduler

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

	"github.com/gpushare/gpushare/pkg/placement"
)

// TestFilterAnswerJSONMatchesResult: the JSON written from a pass's verdicts decodes to what
// json.Marshal of result() decodes to, for every shape of answer and every kind of string,
// and lists the failed nodes in the request's order.
func TestFilterAnswerJSONMatchesResult(t *testing.T) {
	var every strings.Builder
	for c := range 256 {
		every.WriteByte(byte(c)) // control characters, quotes, HTML characters, invalid UTF-8
	}
	odd := []string{"", "plain", every.String(), "<script>&</script>", "line\u2028sep\u2029", "é日本\U0001F600", "\xff\xfe", `"quoted" \back\`}
	reasons := make([]*placement.FitError, 0, 2*len(odd))
	for _, s := range odd {
		reasons = append(reasons, &placement.FitError{Reason: "detail " + s, Summary: s}, &placement.FitError{Reason: s, Summary: s, Unresolvable: true})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var bigNames []string
	var bigPassed []bool
	var bigFailures []*placement.FitError
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
	tests := map[string]*filterAnswer{
		"no candidates":      {args: &extenderv1.ExtenderArgs{NodeNames: &[]string{}}},
		"nil names":          {args: &extenderv1.ExtenderArgs{}},
		"names":              {args: &extenderv1.ExtenderArgs{NodeNames: &names}, names: names, passed: []bool{true, false, true}, failures: []*placement.FitError{nil, reasons[0], nil}},
		"none passes":        {args: &extenderv1.ExtenderArgs{NodeNames: &names}, names: names, passed: nil, failures: []*placement.FitError{reasons[5], reasons[4], reasons[11]}},
		"chosen, no reasons": {args: &extenderv1.ExtenderArgs{NodeNames: &names}, names: names, passed: []bool{false, true, false}},
		"odd strings":        {args: &extenderv1.ExtenderArgs{NodeNames: &odd}, names: odd, passed: make([]bool, len(odd)), failures: reasons[:len(odd)]},
		"3000 candidates":    {args: &extenderv1.ExtenderArgs{NodeNames: &bigNames}, names: bigNames, passed: bigPassed, failures: bigFailures},
		"nodes":              {args: &extenderv1.ExtenderArgs{Nodes: nodes}, names: []string{"n<1>", "n2"}, passed: []bool{true, false}, failures: []*placement.FitError{nil, reasons[2]}},
		"error":              {args: &extenderv1.ExtenderArgs{NodeNames: &names}, names: names, err: "filter: request has no pod"},
	}
	for name, a := range tests {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(a.result())
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.appendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			var gotV, wantV any
			if err := json.Unmarshal(got, &gotV); err != nil {
				t.Fatalf("appendJSON wrote invalid JSON: %v\n%s", err, got)
			}
			if err := json.Unmarshal(want, &wantV); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantV, gotV); diff != "" {
				t.Errorf("appendJSON decodes differently from result() (-want,+got):\n%s", diff)
			}
		})
	}
	t.Run("request order", func(t *testing.T) {
		order := []string{"c", "a", "b"}
		a := &filterAnswer{args: &extenderv1.ExtenderArgs{NodeNames: &order}, names: order, passed: make([]bool, 3), failures: []*placement.FitError{reasons[0], reasons[0], reasons[0]}}
		got, err := a.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := `"FailedNodes":{"c":"","a":"","b":""}`; !strings.Contains(string(got), want) {
			t.Errorf("appendJSON = %s, want it to contain %s", got, want)
		}
	})
}

// TestAppendPrioritiesMatchesEncodingJSON: the hand-written encoding of prioritize's answer
// gives json.Marshal's bytes.
func TestAppendPrioritiesMatchesEncodingJSON(t *testing.T) {
	big := make(extenderv1.HostPriorityList, 3000)
	for i := range big {
		big[i] = extenderv1.HostPriority{Host: fmt.Sprintf("node-%05d", i), Score: int64(i%11) - 1}
	}
	tests := map[string]extenderv1.HostPriorityList{
		"nil":        nil,
		"empty":      {},
		"odd host":   {{Host: "<a&b>\u2028\xff\"q\"", Score: 10}, {Host: "", Score: -9223372036854775808}},
		"3000 hosts": big,
	}
	for name, list := range tests {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(list)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendPriorities(nil, list); string(got) != string(want) {
				t.Errorf("appendPriorities:\n got %.200q\nwant %.200q", got, want)
			}
		})
	}
}

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
