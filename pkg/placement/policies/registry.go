// Package policies names the placement policies: the extender's --policy flag and the
// simulator's --policy list choose from its Registry. The policies do not know each other;
// this package imports them all.
package policies

import (
	"fmt"
	"sort"

	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/fgd"
)

// Default is the policy the extender and the simulator use unless told otherwise.
const Default = fgd.OnlineName

// Factory builds a fresh policy (policies may learn, so every user builds its own).
type Factory func() placement.Policy

// Registry maps policy names to factories.
type Registry map[string]Factory

// NewRegistry returns the built-in policies.
func NewRegistry() Registry {
	return Registry{
		placement.BinpackName: func() placement.Policy { return placement.Binpack{} },
		placement.SpreadName:  func() placement.Policy { return placement.Spread{} },
		placement.RandomName:  func() placement.Policy { return placement.NewRandom(1) },
		fgd.Name:              func() placement.Policy { return fgd.New() },
		fgd.OnlineName:        func() placement.Policy { return fgd.NewOnline() },
	}
}

// New builds the named policy.
func (r Registry) New(name string) (placement.Policy, error) {
	f, ok := r[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %v)", name, r.Names())
	}
	return f(), nil
}

// Names lists the known policy names, sorted.
func (r Registry) Names() []string {
	out := make([]string, 0, len(r))
	for n := range r {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
