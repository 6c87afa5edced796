// Package charttest renders the Helm chart (charts/gpushare) with the pinned helm that `make
// helm` builds, for the tests of the programs the chart deploys: each checks that its
// program's objects, as rendered, run it as the values say.
package charttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Objects are a render's objects, each as YAML, by "Kind/name".
type Objects map[string][]byte

// Render renders the chart in dir with the helm binary at helm, as release gpushare in
// namespace ns with the --set values sets, and returns its objects; a render helm refuses
// returns an error with helm's output. A missing helm fails t.
func Render(t testing.TB, helm, dir, ns string, sets ...string) (Objects, error) {
	t.Helper()
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("no helm at %s: run `make helm` (make test builds it first): %v", helm, err)
	}
	args := []string{"template", "gpushare", dir, "-n", ns}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helm, args...).Output() //nolint:gosec // G204: the pinned helm the test names, with its --set values
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, fmt.Errorf("helm template %v: %w: %s", sets, err, exit.Stderr)
		}
		t.Fatal(err)
	}
	objs := Objects{}
	for doc := range strings.SplitSeq(string(out), "\n---\n") {
		var meta struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("rendered document %q: %v", doc, err)
		}
		if meta.Kind != "" {
			objs[meta.Kind+"/"+meta.Metadata.Name] = []byte(doc)
		}
	}
	return objs, nil
}

// Get decodes, strictly, the object key into out; false when the render has none.
func (o Objects) Get(t testing.TB, key string, out any) bool {
	t.Helper()
	raw, ok := o[key]
	if !ok {
		return false
	}
	if err := yaml.UnmarshalStrict(raw, out); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return true
}
