package policies_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/placement/policies"
)

func TestRegistry(t *testing.T) {
	r := policies.NewRegistry()
	want := []string{"binpack", "fgd", "fgd-online", "random", "spread"}
	if diff := cmp.Diff(want, r.Names()); diff != "" {
		t.Errorf("Names (-want,+got):\n%s", diff)
	}
	if _, err := r.New(policies.Default); err != nil {
		t.Errorf("the default policy %q is not registered: %v", policies.Default, err)
	}
	for _, name := range r.Names() {
		t.Run(name, func(t *testing.T) {
			a, err := r.New(name)
			if err != nil {
				t.Fatal(err)
			}
			if a.Name() != name {
				t.Errorf("policy registered as %q calls itself %q", name, a.Name())
			}
			b, _ := r.New(name)
			if a == b && name != "binpack" && name != "spread" { // stateless policies may be equal values
				t.Errorf("New(%q) returned the same policy twice; policies that learn must be fresh", name)
			}
		})
	}
	if _, err := r.New("best-fit"); err == nil || !strings.Contains(err.Error(), "binpack") {
		t.Errorf("New(unknown) = %v, want an error listing the known policies", err)
	}
}
