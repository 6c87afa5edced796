package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpushare/gpushare/pkg/placement/policies"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string // "" for valid
	}{
		{name: "defaults with trace files", change: func(*Config) {}},
		{name: "production's tie order", change: func(c *Config) { c.TieOrder = TieOrderExtender }},
		{name: "unknown tie order", change: func(c *Config) { c.TieOrder = "random" }, wantErr: `--tie-order must be seeded or extender, not "random"`},
		{name: "no trace", change: func(c *Config) { c.NodesFile = "" }, wantErr: "--nodes and --pods are required"},
		{name: "unknown policy", change: func(c *Config) { c.Policies = []string{"fastest"} }, wantErr: `unknown policy "fastest"`},
		{name: "no seeds", change: func(c *Config) { c.Seeds = nil }, wantErr: "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.NodesFile, c.PodsFile = "nodes.csv", "pods.csv"
			tt.change(&c)
			err := c.Validate(policies.NewRegistry())
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrBadConfig) {
				t.Fatalf("Validate() = %v, want an ErrBadConfig containing %q", err, tt.wantErr)
			}
		})
	}
}
