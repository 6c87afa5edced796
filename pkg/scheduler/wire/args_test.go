package wire

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// TestDecodeArgsLikeKubeSchedulerType: DecodeArgs decodes every body as kube-scheduler's own
// type does, names with escapes, non-ASCII and odd whitespace included, and fails where it
// fails.
func TestDecodeArgsLikeKubeSchedulerType(t *testing.T) {
	bodies := []string{
		`{"NodeNames":["a","b.example.com","node-00001"]}`,
		`{"NodeNames":[]}`,
		`{"NodeNames":null}`,
		`{}`,
		`{"nodenames":["lower-case key"]}`,
		"{\"NodeNames\":\n [ \"a\" ,\t\"b\"\r\n ] }",
		`{"NodeNames":["a\"b","c\\d","\u00e9t\u00e9","\ud83d\ude00"]}`,
		`{"NodeNames":["été","日本"]}`,
		"{\"NodeNames\":[\"bad\xffutf8\"]}",
		`{"NodeNames":["a",1]}`,
		`{"NodeNames":"a"}`,
		`{"NodeNames":[["a"]]}`,
		`{"NodeNames":["a"],"NodeNames":["b"]}`,
		`{"NodeNames":[""]}`,
		`{"Pod":{"metadata":{"name":"p"}},"NodeNames":["n1"]}`,
		`{"Pod":null,"Nodes":null,"NodeNames":null}`,
		`{"Pod":{"metadata":{"name":"p"}},"Pod":{"metadata":{"namespace":"ns"}}}`,
		`{"P\u006fd":{"metadata":{"name":"p"}},"NodeNames":["n1"]}`,
		`{"pod":{"metadata":{"name":"p"}}}`,
		`{"Pod":5,"NodeNames":["n1"]}`,
		`{"Pod":{"metadata":{"name":"a}\"]{["}},"NodeNames":["n1"]}`,
		`{"Pod":{"metadata":[}},"NodeNames":["n1"]}`,
		`{"Pod":{"metadata":{"name":"p"}}},"NodeNames":["n1"]}`,
		`{"Pod":{"metadata":{"name":"p"}},"NodeNames":["n1"]} {}`,
		`{"Pod":{"metadata":{"name":"p"}},"NodeNames":["n1"],}`,
		`{"Pod":{"metadata":{"name":"p"}} "NodeNames":["n1"]}`,
		`{"Pod" {"metadata":{"name":"p"}}}`,
		`{"Nodes":{"items":[{"metadata":{"name":"n1"}}]},"NodeNames":null}`,
		`{"Pod":{"metadata":{"name":"p"}},"Extra":1}`,
		`{"Pod":tru,"NodeNames":["n1"]}`,
		`{"Pod":{"spec":{"containers":[{"name":"c","resources":{"limits":{"aliyun.com/gpu-mem":"4"}}}]}}}`,
		`{"Pod":{"spec":{"containers":[{"name":"c","resources":{"limits":{"aliyun.com/gpu-mem":"x"}}}]}}}`,
		`{"Pod":{"metadata":{"name":"p"}}`,
		` {"NodeNames":["n1"]} `,
		`[]`,
		`null`,
		``,
	}
	rng := rand.New(rand.NewPCG(1, 1))
	pieces := []string{"a", "-", ".", "Z", "9", `\"`, `\\`, `\n`, `\u0041`, "é", " ", "\t"}
	for range 300 {
		var names []string
		for range rng.IntN(6) {
			var b strings.Builder
			for range rng.IntN(8) {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			}
			names = append(names, `"`+b.String()+`"`)
		}
		sep := []string{",", " , ", ",\n"}[rng.IntN(3)]
		bodies = append(bodies, fmt.Sprintf(`{"NodeNames":[%s]}`, strings.Join(names, sep)))
	}
	for _, body := range bodies {
		var want extenderv1.ExtenderArgs
		wantErr := json.Unmarshal([]byte(body), &want)
		got, gotErr := DecodeArgs([]byte(body))
		if (wantErr == nil) != (gotErr == nil) {
			t.Errorf("%q: error %v, kube-scheduler's type: %v", body, gotErr, wantErr)
			continue
		}
		if wantErr != nil {
			continue
		}
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("%q (-kube-scheduler's type,+ours):\n%s", body, diff)
		}
	}
}

// FuzzDecodeArgs: DecodeArgs (the hand-written decoder, then encoding/json for what it
// declines) gives what encoding/json alone gives, value and error alike, and keeps nothing of
// the body.
func FuzzDecodeArgs(f *testing.F) {
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]},"status":{"phase":"Pending"}},"NodeNames":["n1","n2"]}`))
	f.Add([]byte(`{"Pod":{"metadata":{"name":"a}\"]"}},"Nodes":null,"NodeNames":["n\u0031"]}`))
	f.Add([]byte(`{"Nodes":{"items":[{"metadata":{"name":"n1"}}]}}`))
	f.Add([]byte(`{"Pod":{"metadata":[}},"NodeNames":["n1"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var std extenderArgs
		wantErr := Decode(body, &std)
		want := &extenderv1.ExtenderArgs{Pod: std.Pod, Nodes: std.Nodes, NodeNames: std.NodeNames}
		reused := append([]byte(nil), body...)
		got, gotErr := DecodeArgs(reused)
		for i := range reused { // the caller may reuse the body's buffer
			reused[i] = 0
		}
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
			t.Fatalf("%q: error %v, encoding/json's: %v", body, gotErr, wantErr)
		}
		if wantErr == nil {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%q (-encoding/json,+DecodeArgs):\n%s", body, diff)
			}
		}
	})
}

// TestDecodeArgsErrors: a body DecodeArgs cannot decode gets encoding/json's error, naming
// the field and the type it should have.
func TestDecodeArgsErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{name: "pod of the wrong type", body: `{"Pod":1}`, want: "json: cannot unmarshal number into Go struct field extenderArgs.Pod of type v1.Pod"},
		{name: "names not a list", body: `{"NodeNames":"n1"}`, want: "json: cannot unmarshal string into Go struct field extenderArgs.NodeNames of type []string"},
		{name: "garbage", body: `{"Pod": garbage`, want: "invalid character 'g' looking for beginning of value"},
		{name: "cut short", body: `[1,2`, want: "unexpected EOF"},
		{name: "data after the value", body: `{"NodeNames":[]} {}`, want: "unexpected data after the JSON value"},
		{name: "empty", body: ``, want: "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeArgs([]byte(tt.body))
			if diff := cmp.Diff(tt.want, fmt.Sprint(err)); diff != "" {
				t.Errorf("DecodeArgs(%q) error (-want,+got):\n%s", tt.body, diff)
			}
		})
	}
}

// TestPlainStrings covers the hand-written names decoder itself: it accepts plain arrays and
// declines (ok false) whatever it does not decode itself.
func TestPlainStrings(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{in: `["a","b"]`, want: []string{"a", "b"}, ok: true},
		{in: ` [ ] `, want: []string{}, ok: true},
		{in: `["a\"b"]`},
		{in: `["é"]`},
		{in: "[\"a\tb\"]"},
		{in: `["a",]`},
		{in: `["a" "b"]`},
		{in: `["a"] x`},
		{in: `{"a":1}`},
		{in: `["a`},
		{in: ``},
	}
	for _, tt := range tests {
		body := []byte(tt.in)
		got, ok := plainStrings(body)
		for i := range body { // the names are the decoder's own, not views of the body
			body[i] = 'X'
		}
		if ok != tt.ok || (ok && !cmp.Equal(tt.want, got)) {
			t.Errorf("plainStrings(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
