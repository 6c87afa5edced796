package gpumem_test

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

func TestModelMatches(t *testing.T) {
	tests := []struct {
		entry, model string
		want         bool
	}{
		{"A100", "NVIDIA A100-SXM4-40GB", true},
		{"a100-sxm4", "NVIDIA A100-SXM4-40GB", true},
		{"A10", "NVIDIA A100-SXM4-40GB", false},
		{"A10", "NVIDIA A10", true},
		{"T4", "Tesla T4", true},
		{"V100M16", "V100M32", false},
		{"", "Tesla T4", false},
		{"SXM4 A100", "NVIDIA A100-SXM4-40GB", false},
	}
	for _, tt := range tests {
		t.Run(tt.entry+"/"+tt.model, func(t *testing.T) {
			if got := gpumem.ModelMatches(tt.entry, tt.model); got != tt.want {
				t.Errorf("ModelMatches(%q, %q) = %v, want %v", tt.entry, tt.model, got, tt.want)
			}
		})
	}
}
