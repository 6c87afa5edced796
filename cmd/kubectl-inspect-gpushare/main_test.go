package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	st "github.com/gpushare/gpushare/pkg/inspect/testing"
)

// goldenDir holds the in-process golden files of pkg/inspect; the binary run through kubectl
// must print exactly the same.
const goldenDir = "../../pkg/inspect/testdata"

// TestKubectlPlugin builds the binary, puts it on PATH and runs it as `kubectl inspect gpushare`
// through the real kubectl against a fake API server.
func TestKubectlPlugin(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH; this test needs a real kubectl to dispatch the plugin")
	}
	binDir := buildPlugin(t)
	tests := []struct {
		name       string
		args       []string
		forbidPods bool
		dra        bool             // the server serves resource.k8s.io/v1
		objs       []runtime.Object // the cluster; st.Cluster() when nil
		golden     string           // file in goldenDir that stdout must equal
		wantFail   string           // when set, the run must exit non-zero with this on stderr
		podLists   []string
		sliceLists []string
	}{
		{name: "table", golden: "table.golden",
			podLists: []string{"spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"}},
		{name: "details", args: []string{"-d"}, golden: "details.golden"},
		{name: "details namespace", args: []string{"-d", "-n", "team-a"}, golden: "details-namespace.golden"},
		{name: "wide", args: []string{"-o", "wide"}, golden: "wide.golden"},
		{name: "json", args: []string{"-o", "json"}, golden: "json.golden"},
		{name: "yaml", args: []string{"-o", "yaml"}, golden: "yaml.golden"},
		{name: "contract flag", args: []string{"--unit", "1Mi"}, golden: "unit-mib.golden"},
		{name: "named nodes", args: []string{"node-c", "node-b", "node-c"}, golden: "nodes.golden",
			podLists: []string{
				"spec.nodeName=node-c,status.phase!=Succeeded,status.phase!=Failed",
				"spec.nodeName=node-b,status.phase!=Succeeded,status.phase!=Failed",
			}},
		{name: "unknown node", args: []string{"nope"}, wantFail: `unknown node: node "nope" not found`},
		{name: "forbidden", forbidPods: true, wantFail: "may not list pods in all namespaces"},
		{name: "dra", dra: true, objs: st.DRACluster(), golden: "dra-table.golden",
			sliceLists: []string{"spec.driver=" + st.DRADriver}},
		{name: "dra json", dra: true, objs: st.DRACluster(), args: []string{"-o", "json"}, golden: "dra-json.golden"},
		{name: "dra named node", dra: true, objs: st.DRACluster(), args: []string{"node-d"}, golden: "dra-node.golden",
			sliceLists: []string{"spec.driver=" + st.DRADriver + ",spec.nodeName=node-d"}},
		{name: "dra not served", objs: st.DRACluster(), golden: "table.golden"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.objs
			if objs == nil {
				objs = st.Cluster()
			}
			api, srv := newFakeAPIServer(t, objs, tc.forbidPods, tc.dra)
			kubeconfig := writeKubeconfig(t, srv.URL)
			cmd := exec.Command(kubectl, append([]string{"inspect", "gpushare", "--kubeconfig", kubeconfig}, tc.args...)...)
			cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
				"HOME="+t.TempDir(), "KUBECONFIG=")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			checkRun(t, tc.golden, tc.wantFail, err, stdout.String(), stderr.String())
			if tc.podLists != nil {
				if diff := cmp.Diff(tc.podLists, firstLists(api.Requests(), "/api/v1/pods")); diff != "" {
					t.Errorf("pod lists (first page of each, -want,+got):\n%s", diff)
				}
			}
			if tc.sliceLists != nil {
				if diff := cmp.Diff(tc.sliceLists, firstLists(api.Requests(), draPrefix+"/resourceslices")); diff != "" {
					t.Errorf("ResourceSlice lists (first page of each, -want,+got):\n%s", diff)
				}
			}
		})
	}
}

func checkRun(t *testing.T, golden, wantFail string, err error, stdout, stderr string) {
	t.Helper()
	var exitErr *exec.ExitError
	if wantFail != "" {
		if !errors.As(err, &exitErr) || !strings.Contains(stderr, wantFail) {
			t.Fatalf("want a failure saying %q, got err=%v stderr=%q stdout=%q", wantFail, err, stderr, stdout)
		}
		return
	}
	if err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, stderr)
	}
	want, err := os.ReadFile(filepath.Join(goldenDir, golden))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), stdout); diff != "" {
		t.Errorf("stdout differs from %s (-want,+got):\n%s", golden, diff)
	}
}

// firstLists returns the field selector of each list of path that starts a new list (no
// continue token), in order.
func firstLists(requests []string, listPath string) []string {
	var out []string
	for _, r := range requests {
		path, query, _ := strings.Cut(strings.TrimPrefix(r, "GET "), "?")
		if path != listPath || strings.Contains(query, "continue=") {
			continue
		}
		for _, kv := range strings.Split(query, "&") {
			if v, ok := strings.CutPrefix(kv, "fieldSelector="); ok {
				out = append(out, unescape(v))
			}
		}
	}
	return out
}

// buildPlugin builds this package as kubectl-inspect-gpushare into a temp dir and returns it.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// The go command running this test: go test puts its own GOROOT/bin first on PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	out, err := exec.Command(goBin, "build", "-o", filepath.Join(dir, "kubectl-inspect-gpushare"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: ` + server + `
users:
- name: viewer
  user:
    token: fake-token
contexts:
- name: fake
  context:
    cluster: fake
    user: viewer
current-context: fake
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
