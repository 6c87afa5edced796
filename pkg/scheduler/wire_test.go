package scheduler

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/placement"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from what the handlers answer")

// TestWireGolden pins the JSON of the wire types: what kube-scheduler sends us
// (<name>.request.golden.json, the encoding of k8s.io/kube-scheduler/extender/v1 values) and
// what our handlers answer on routeFixture (<name>.response.golden.json). Run with -update to
// regenerate after an intended change, and review the diff.
func TestWireGolden(t *testing.T) {
	pod := st.MakePod().Name("p").GPUMem(4).Obj()
	tooBig := st.MakePod().Name("huge").GPUMem(10_000_000_000).Obj() // "10G" written for 10 GiB
	tests := []struct {
		name    string
		method  string
		path    string
		request any // nil for GET
		// response is the zero value of the answer's wire type.
		response   any
		wantStatus int
	}{
		{
			name: "filter-nodenames", method: http.MethodPost, path: "/filter",
			request:  extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("n1", "n2", "n3", "n4", "ghost")},
			response: extenderv1.ExtenderFilterResult{}, wantStatus: http.StatusOK,
		},
		{
			name: "filter-nodes", method: http.MethodPost, path: "/filter",
			request: extenderv1.ExtenderArgs{Pod: pod, Nodes: &v1.NodeList{Items: []v1.Node{
				*st.MakeNode("n1").GPUs(16, 16).Obj(), *st.MakeNode("n2").GPUs(8).Obj()}}},
			response: extenderv1.ExtenderFilterResult{}, wantStatus: http.StatusOK,
		},
		{
			name: "filter-invalid-request", method: http.MethodPost, path: "/filter",
			request:  extenderv1.ExtenderArgs{Pod: tooBig, NodeNames: names("n1", "n2")},
			response: extenderv1.ExtenderFilterResult{}, wantStatus: http.StatusOK,
		},
		{
			name: "prioritize", method: http.MethodPost, path: "/prioritize",
			request:  extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("n1", "n2", "n3", "n4", "ghost")},
			response: extenderv1.HostPriorityList{}, wantStatus: http.StatusOK,
		},
		{
			name: "bind", method: http.MethodPost, path: "/bind",
			request:  extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n4"},
			response: extenderv1.ExtenderBindingResult{}, wantStatus: http.StatusOK,
		},
		{
			name: "bind-does-not-fit", method: http.MethodPost, path: "/bind",
			request:  extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n2"},
			response: extenderv1.ExtenderBindingResult{}, wantStatus: http.StatusOK,
		},
		{
			name: "preempt-meta-victims", method: http.MethodPost, path: "/preempt",
			request: extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"n2": {Pods: []*extenderv1.MetaPod{{UID: "uid-busy"}}, NumPDBViolations: 1},
				"n3": {Pods: []*extenderv1.MetaPod{{UID: "uid-x"}}},
			}},
			response: extenderv1.ExtenderPreemptionResult{}, wantStatus: http.StatusOK,
		},
		{
			name: "preempt-victims", method: http.MethodPost, path: "/preempt",
			request: extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToVictims: map[string]*extenderv1.Victims{
				"n2": {Pods: []*v1.Pod{st.MakePod().Name("busy").GPUMem(6).Node("n2").Obj()}},
			}},
			response: extenderv1.ExtenderPreemptionResult{}, wantStatus: http.StatusOK,
		},
		{
			name: "inspect", method: http.MethodGet, path: "/inspect",
			response: InspectResult{}, wantStatus: http.StatusOK,
		},
		{
			name: "inspect-node", method: http.MethodGet, path: "/inspect/n2",
			response: placement.NodeInfo{}, wantStatus: http.StatusOK,
		},
		{
			name: "malformed", method: http.MethodPost, path: "/filter", request: json.RawMessage(`{"Pod":1}`),
			response: errorBody{}, wantStatus: http.StatusBadRequest,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			nodes, pods := routeFixture()
			// The preempt goldens show kube-scheduler's proposal filtered (--gpu-preemption=false);
			// the extender's own preemption answers no GPU victims (preempt_test.go).
			ext, api := extenderOn(logger, nodes, pods, WithPreemption(false))
			srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: DefaultMaxBodyBytes}, logger))
			defer srv.Close()
			var body []byte
			if tc.request != nil {
				body = checkGolden(t, tc.name+".request", mustIndent(t, tc.request))
				checkRoundTrip(t, tc.request, body)
			}
			status, _, answer := do(t, srv, tc.method, Prefix+tc.path, string(body))
			if status != tc.wantStatus {
				t.Errorf("status = %d, want %d; body %s", status, tc.wantStatus, answer)
			}
			decodeAs(t, tc.response, answer) // the answer is exactly of its wire type
			checkGolden(t, tc.name+".response", indentJSON(t, answer))
			if tc.name == "bind" {
				got, err := api.CoreV1().Pods("default").Get(t.Context(), "p", metav1.GetOptions{})
				if err != nil {
					t.Fatalf("get pod: %v", err)
				}
				checkGolden(t, tc.name+".annotations", mustIndent(t, got.Annotations))
			}
		})
	}
}

// checkGolden compares got with testdata/<name>.golden.json, or rewrites the file under
// -update. It returns the golden content.
func checkGolden(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want,+got):\n%s", path, diff)
	}
	return want
}

// checkRoundTrip decodes a golden request back into its type: what kube-scheduler sends must
// decode into the value it encoded.
func checkRoundTrip(t *testing.T, want any, golden []byte) {
	t.Helper()
	if _, raw := want.(json.RawMessage); raw {
		return
	}
	got := reflect.New(reflect.TypeOf(want))
	dec := json.NewDecoder(bytes.NewReader(golden))
	dec.DisallowUnknownFields()
	if err := dec.Decode(got.Interface()); err != nil {
		t.Fatalf("decode golden request as %T: %v", want, err)
	}
	// JSON does not tell an empty map from a missing one.
	if diff := cmp.Diff(want, got.Elem().Interface(), cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(placement.NodeInfo{})); diff != "" {
		t.Errorf("request round trip (-want,+got):\n%s", diff)
	}
}

func mustIndent(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return indentJSON(t, raw)
}

func indentJSON(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, bytes.TrimSpace(raw), "", "  "); err != nil {
		t.Fatalf("indent %s: %v", raw, err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}
