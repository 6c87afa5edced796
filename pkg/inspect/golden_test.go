package inspect_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/inspect"
	st "github.com/gpushare/gpushare/pkg/inspect/testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// run executes the command on a fake clientset holding objs and returns stdout and stderr.
func run(t *testing.T, objs []runtime.Object, args ...string) (string, string, error) {
	t.Helper()
	return runOn(t, fake.NewClientset(objs...), args...)
}

// runOn executes the command on client and returns stdout and stderr.
func runOn(t *testing.T, client *fake.Clientset, args ...string) (string, string, error) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := inspect.NewCmd(streams, inspect.WithClient(client))
	cmd.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// golden compares got with testdata/<name>.golden, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs from %s (-want,+got):\n%s", name, path, diff)
	}
}

func TestGoldenViews(t *testing.T) {
	tests := []struct {
		name string
		objs []runtime.Object
		args []string
		dra  bool // the API server serves resource.k8s.io/v1
	}{
		{name: "table", args: nil},
		{name: "wide", args: []string{"-o", "wide"}},
		{name: "details", args: []string{"-d"}},
		{name: "details-wide", args: []string{"--details", "-o", "wide"}},
		{name: "details-namespace", args: []string{"-d", "-n", "team-a"}},
		{name: "details-all-namespaces", args: []string{"-d", "-n", "team-a", "-A"}},
		{name: "json", args: []string{"-o", "json"}},
		{name: "yaml", args: []string{"-o", "yaml"}},
		{name: "nodes", args: []string{"node-c", "node-b", "node-c"}},
		{name: "unit-mib", args: []string{"--unit", "1Mi"}},
		{name: "empty", objs: st.Nodes()[3:]},
		{name: "empty-json", objs: []runtime.Object{}, args: []string{"-o", "json"}},
		{name: "details-wide-topology", objs: st.TopologyCluster(), args: []string{"-d", "-o", "wide"}},
		{name: "json-topology", objs: st.TopologyCluster(), args: []string{"-o", "json"}},
		{name: "wide-capacity", objs: st.CapacityCluster(), args: []string{"-o", "wide"}},
		{name: "json-capacity", objs: st.CapacityCluster(), args: []string{"-o", "json"}},
		{name: "dra-table", objs: st.DRACluster(), dra: true},
		{name: "dra-wide", objs: st.DRACluster(), dra: true, args: []string{"-o", "wide"}},
		{name: "dra-details", objs: st.DRACluster(), dra: true, args: []string{"-d"}},
		{name: "dra-details-wide", objs: st.DRACluster(), dra: true, args: []string{"-d", "-o", "wide"}},
		{name: "dra-details-namespace", objs: st.DRACluster(), dra: true, args: []string{"-d", "-n", "team-a", "node-d"}},
		{name: "dra-json", objs: st.DRACluster(), dra: true, args: []string{"-o", "json"}},
		{name: "dra-node", objs: st.DRACluster(), dra: true, args: []string{"node-d"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := st.Cluster()
			if tc.objs != nil {
				objs = tc.objs
			}
			out, errOut, err := runOn(t, newDRAClient(objs, draServer{served: tc.dra}), tc.args...)
			if err != nil {
				t.Fatalf("run %v: %v", tc.args, err)
			}
			got := out
			if errOut != "" {
				got += "--- stderr ---\n" + errOut
			}
			golden(t, tc.name, got)
		})
	}
}

// TestPercentNames checks the '%' pod name of the fixture reaches every view verbatim.
func TestPercentNames(t *testing.T) {
	const name = "util-100%s%d%%"
	for _, args := range [][]string{{"-d"}, {"-d", "-o", "wide"}, {"-o", "json"}, {"-o", "yaml"}} {
		out, _, err := run(t, st.Cluster(), args...)
		if err != nil {
			t.Fatalf("run %v: %v", args, err)
		}
		if !bytes.Contains([]byte(out), []byte(name)) {
			t.Errorf("run %v: output lacks pod name %q:\n%s", args, name, out)
		}
	}
}
