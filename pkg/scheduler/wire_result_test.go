package scheduler

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// TestAppendFilterResultMatchesEncodingJSON: the hand-written encoding gives json.Marshal's
// bytes for every shape of result and every kind of string.
func TestAppendFilterResultMatchesEncodingJSON(t *testing.T) {
	var every strings.Builder
	for c := range 256 {
		every.WriteByte(byte(c)) // control characters, quotes, HTML characters, invalid UTF-8
	}
	odd := []string{"", "plain", every.String(), "<script>&</script>", "line\u2028sep\u2029", "é日本\U0001F600", "\xff\xfe", `"quoted" \back\`}
	empty := []string{}
	rng := rand.New(rand.NewPCG(1, 2))
	big := extenderv1.FailedNodesMap{}
	for i := range 3000 {
		big[fmt.Sprintf("node-%05d", rng.IntN(100000))] = odd[i%len(odd)]
	}
	names := []string{"n1", odd[2], "n3"}
	tests := map[string]*extenderv1.ExtenderFilterResult{
		"zero":                 {},
		"names and maps":       {NodeNames: &names, FailedNodes: extenderv1.FailedNodesMap{"b": "x", "a": "y"}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}},
		"empty names":          {NodeNames: &empty},
		"pointer to nil names": {NodeNames: new([]string)},
		"odd strings":          {FailedNodes: extenderv1.FailedNodesMap{odd[2]: odd[4], odd[6]: odd[3]}, Error: odd[2]},
		"3000 failed nodes":    {NodeNames: &empty, FailedNodes: big, FailedAndUnresolvableNodes: big},
		"nodes":                {Nodes: &v1.NodeList{Items: []v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n<1>", Annotations: map[string]string{"a": odd[3]}}}}}},
		"error":                {Error: "filter: request has no pod"},
	}
	for name, res := range tests {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendFilterResult(nil, res)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("appendFilterResult:\n got %q\nwant %q", got, want)
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
