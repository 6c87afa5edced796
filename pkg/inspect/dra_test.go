package inspect_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/inspect"
	st "github.com/gpushare/gpushare/pkg/inspect/testing"
	"github.com/gpushare/gpushare/pkg/placement"
)

// draServer is how the fake API server treats DRA: whether it serves resource.k8s.io/v1, and
// which of its resources a list of is forbidden.
type draServer struct {
	served bool
	forbid string
}

// newDRAClient returns a fake clientset holding objs that serves DRA as s says.
func newDRAClient(objs []runtime.Object, s draServer) *fake.Clientset {
	client := fake.NewClientset(objs...)
	if s.served {
		client.Resources = st.DRAResources()
	}
	if s.forbid != "" {
		client.PrependReactor("list", s.forbid, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: s.forbid}, "", nil)
		})
	}
	return client
}

// runDRA executes the command on a fake clientset holding objs that serves DRA as s says and
// returns stdout.
func runDRA(t *testing.T, objs []runtime.Object, s draServer, args ...string) (string, error) {
	t.Helper()
	out, _, err := runOn(t, newDRAClient(objs, s), args...)
	return out, err
}

// TestDRAReport checks the DRA node's figures in the JSON document: capacity from the slice,
// allocated from the claims' consumed memory, the pods holding each card, a tainted card
// unhealthy, and the mode only on the DRA node.
func TestDRAReport(t *testing.T) {
	out, err := runDRA(t, st.DRACluster(), draServer{served: true}, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r inspect.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	modes := map[string]string{}
	var dra *inspect.NodeReport
	for i := range r.Nodes {
		modes[r.Nodes[i].Name] = r.Nodes[i].Mode
		if r.Nodes[i].Name == "node-d" {
			dra = &r.Nodes[i]
		}
	}
	wantModes := map[string]string{"node-a": "", "node-b": "", "node-c": "", "node-d": inspect.ModeDRA}
	if diff := cmp.Diff(wantModes, modes); diff != "" {
		t.Fatalf("node modes (-want,+got):\n%s", diff)
	}
	wantGPUs := []inspect.GPUReport{
		{Index: 0, UUID: "GPU-node-d-0", Model: "Tesla T4", Healthy: true, Allocated: 10, Total: 16},
		{Index: 1, UUID: "GPU-node-d-1", Model: "Tesla T4", Healthy: true, Allocated: 10, Total: 16},
		{Index: 2, UUID: "GPU-node-d-2", Model: "NVIDIA A10", Healthy: false, Allocated: 0, Total: 24},
	}
	if diff := cmp.Diff(wantGPUs, dra.GPUs); diff != "" {
		t.Errorf("node-d cards (-want,+got):\n%s", diff)
	}
	type holding struct {
		Units int64
		GPUs  map[string]int64
	}
	pods := map[string]holding{}
	for _, p := range dra.Pods {
		pods[p.Namespace+"/"+p.Name] = holding{Units: p.Units, GPUs: p.GPUs}
	}
	wantPods := map[string]holding{
		"default/infer-a": {Units: 4, GPUs: map[string]int64{"0": 4}},
		"team-a/infer-b":  {Units: 6, GPUs: map[string]int64{"0": 6}},
		"default/train-d": {Units: 10, GPUs: map[string]int64{"1": 10}},
	}
	if diff := cmp.Diff(wantPods, pods); diff != "" {
		t.Errorf("node-d pods (-want,+got):\n%s", diff)
	}
	if dra.Inventory != placement.FromResourceSlice || dra.Allocated != 20 || dra.Total != 56 {
		t.Errorf("node-d inventory %q, allocated/total %d/%d; want resourceslice, 20/56", dra.Inventory, dra.Allocated, dra.Total)
	}
	if want := (inspect.Summary{Allocated: 40 + 20, Total: 184 + 56}); r.Cluster != want {
		t.Errorf("cluster %+v, want %+v", r.Cluster, want)
	}
}

// TestDRAOffUnchanged checks that where DRA is not served, or slices or claims may not be
// listed, or no slice is of the driver asked for, the output is exactly the device-plugin
// cluster's golden output.
func TestDRAOffUnchanged(t *testing.T) {
	tests := []struct {
		name   string
		server draServer
		extra  []string
	}{
		{name: "resource.k8s.io not served", server: draServer{}},
		{name: "another driver", server: draServer{served: true}, extra: []string{"--dra-driver", "none.example.com"}},
		{name: "claims forbidden", server: draServer{served: true, forbid: "resourceclaims"}},
		{name: "slices forbidden", server: draServer{served: true, forbid: "resourceslices"}},
	}
	views := map[string][]string{"table.golden": nil, "wide.golden": {"-o", "wide"}, "json.golden": {"-o", "json"},
		"details-wide.golden": {"-d", "-o", "wide"}}
	for _, tc := range tests {
		for file, args := range views {
			t.Run(tc.name+"/"+file, func(t *testing.T) {
				out, err := runDRA(t, st.DRACluster(), tc.server, append(append([]string{}, args...), tc.extra...)...)
				if err != nil {
					t.Fatalf("run %v: %v", args, err)
				}
				want, err := os.ReadFile(filepath.Join("testdata", file))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(want), out); diff != "" {
					t.Errorf("output differs from %s (-want,+got):\n%s", file, diff)
				}
			})
		}
	}
}

// TestFetchDRASelectors checks the API calls: discovery, then the driver's slices (of each
// named node) and the claims; only discovery where DRA is not served.
func TestFetchDRASelectors(t *testing.T) {
	tests := []struct {
		name   string
		served bool
		nodes  []string
		want   []string
		claims int
	}{
		{name: "not served", want: []string{"get resource "}},
		{name: "all nodes", served: true, claims: 6, want: []string{
			"get resource ",
			"list resourceslices spec.driver=" + st.DRADriver,
			"list resourceclaims ",
		}},
		{name: "named nodes", served: true, nodes: []string{"node-d", "node-a"}, claims: 4, want: []string{
			"get resource ",
			"list resourceslices spec.driver=" + st.DRADriver + ",spec.nodeName=node-d",
			"list resourceslices spec.driver=" + st.DRADriver + ",spec.nodeName=node-a",
			"list resourceclaims ",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := newDRAClient(st.DRACluster(), draServer{served: tc.served})
			objs, err := inspect.FetchDRA(ctx, client, st.DRADriver, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, describe(client.Actions())); diff != "" {
				t.Errorf("API calls (-want,+got):\n%s", diff)
			}
			if len(objs.Claims) != tc.claims {
				t.Errorf("kept %d claims, want %d", len(objs.Claims), tc.claims)
			}
		})
	}
}
