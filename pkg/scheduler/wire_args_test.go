package scheduler

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// TestExtenderArgsDecodeLikeKubeSchedulerType: the handler's wire type decodes every body as
// kube-scheduler's own type does, names with escapes, non-ASCII and odd whitespace included,
// and fails where it fails.
func TestExtenderArgsDecodeLikeKubeSchedulerType(t *testing.T) {
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
		var got extenderArgs
		gotErr := decodeBody([]byte(body), &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Errorf("%q: error %v, kube-scheduler's type: %v", body, gotErr, wantErr)
			continue
		}
		if wantErr != nil {
			continue
		}
		if diff := cmp.Diff(&want, got.args()); diff != "" {
			t.Errorf("%q (-kube-scheduler's type,+ours):\n%s", body, diff)
		}
	}
}

// FuzzExtenderArgsDecode: the handler's decoding of filter and prioritize bodies (decodeFast,
// then encoding/json for what it declines) gives what encoding/json alone gives, value and
// error alike, and declines without leaving anything behind.
func FuzzExtenderArgsDecode(f *testing.F) {
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]},"status":{"phase":"Pending"}},"NodeNames":["n1","n2"]}`))
	f.Add([]byte(`{"Pod":{"metadata":{"name":"a}\"]"}},"Nodes":null,"NodeNames":["n\u0031"]}`))
	f.Add([]byte(`{"Nodes":{"items":[{"metadata":{"name":"n1"}}]}}`))
	f.Add([]byte(`{"Pod":{"metadata":[}},"NodeNames":["n1"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var want extenderArgs
		wantErr := decodeJSON(body, &want)
		got := extenderArgs{nameBuf: []string{"stale", "names", "of", "a", "pooled", "slice"}[:0], intern: func(names []string) {
			for i := range names {
				names[i] = strings.Clone(names[i])
			}
		}}
		pooled := append([]byte(nil), body...)
		gotErr := decodeBody(pooled, &got)
		for i := range pooled { // the handler reuses the body's buffer
			pooled[i] = 0
		}
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
			t.Fatalf("%q: error %v, encoding/json's: %v", body, gotErr, wantErr)
		}
		if wantErr == nil {
			if diff := cmp.Diff(want.args(), got.args()); diff != "" {
				t.Fatalf("%q (-encoding/json,+decodeBody):\n%s", body, diff)
			}
		}
		var declined extenderArgs
		if !declined.decodeFast(body) && !cmp.Equal(declined.args(), (&extenderArgs{}).args()) {
			t.Fatalf("%q: declined but left %+v", body, declined)
		}
	})
}

// TestPlainStrings covers the fast path itself: it accepts plain arrays and declines (ok false)
// whatever it does not decode itself.
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
	clone := func(names []string) {
		for i := range names {
			names[i] = strings.Clone(names[i])
		}
	}
	for _, tt := range tests {
		got, ok := plainStrings([]byte(tt.in), nil, nil)
		if ok != tt.ok || (ok && !cmp.Equal(tt.want, got)) {
			t.Errorf("plainStrings(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		// Into a used slice, large enough or not, interned or not: the same names, none of the
		// old ones, and none that changes when the body's buffer is reused.
		for _, intern := range []func([]string){nil, clone} {
			for _, into := range [][]string{{"old"}, make([]string, 3, 8)} {
				body := []byte(tt.in)
				got, ok := plainStrings(body, into, intern)
				for i := range body {
					body[i] = 'X'
				}
				if ok != tt.ok || (ok && !cmp.Equal(tt.want, got)) {
					t.Errorf("plainStrings(%q, %q, intern %v) = %q, %v; want %q, %v", tt.in, into, intern != nil, got, ok, tt.want, tt.ok)
				}
				for _, old := range into[:cap(into)] {
					if strings.Contains(old, "X") {
						t.Errorf("plainStrings(%q, intern %v) left a view of the body in its storage: %q", tt.in, intern != nil, into[:cap(into)])
					}
				}
			}
		}
	}
}
