package gpumem

import (
	"errors"
	"fmt"
	"testing"
)

func TestFitError(t *testing.T) {
	tests := []struct {
		name string
		err  *FitError
		want string
	}{
		{name: "reason", err: &FitError{Reason: "GPU memory: no GPU has 4 GiB free (largest 2 GiB)", Summary: "GPU memory: no GPU has 4 GiB free"},
			want: "GPU memory: no GPU has 4 GiB free (largest 2 GiB)"},
		{name: "summary only", err: &FitError{Summary: "GPU memory: node has no shared GPUs", Unresolvable: true}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			var fe *FitError
			if !errors.As(fmt.Errorf("bind: %w", tt.err), &fe) || fe != tt.err {
				t.Errorf("errors.As did not find the FitError")
			}
		})
	}
}
