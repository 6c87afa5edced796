package contract_test

import (
	"errors"
	"testing"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

// TestCoreLimit holds CoreLimit to the admission policy's rule for the core annotation: once
// trimmed of spaces, '^[0-9]{1,3}$' of a value from 1 to 100, no sign.
func TestCoreLimit(t *testing.T) {
	names := contract.DefaultNames()
	tests := []struct {
		name    string
		value   *string // nil: no annotation
		want    int
		wantOK  bool
		wantErr bool
	}{
		{name: "none", value: nil},
		{name: "30", value: ptr("30"), want: 30, wantOK: true},
		{name: "spaces around are trimmed, as the policy does", value: ptr(" 30 "), want: 30, wantOK: true},
		{name: "1", value: ptr("1"), want: 1, wantOK: true},
		{name: "100", value: ptr("100"), want: 100, wantOK: true},
		{name: "leading zero, three digits", value: ptr("030"), want: 30, wantOK: true},
		{name: "plus sign", value: ptr("+30"), wantErr: true},
		{name: "minus one", value: ptr("-1"), wantErr: true},
		{name: "zero", value: ptr("0"), wantErr: true},
		{name: "101", value: ptr("101"), wantErr: true},
		{name: "four digits", value: ptr("0030"), wantErr: true},
		{name: "empty", value: ptr(""), wantErr: true},
		{name: "spaces only", value: ptr("  "), wantErr: true},
		{name: "inner space", value: ptr("3 0"), wantErr: true},
		{name: "percent sign", value: ptr("30%"), wantErr: true},
		{name: "fullwidth digits", value: ptr("３０"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := st.MakePod().GPUMem(1)
			if tt.value != nil {
				w.Annotation(contract.DefaultCoreKey, *tt.value)
			}
			pod := w.Obj()
			got, ok, err := contract.CoreLimit(pod, &names)
			if tt.wantErr {
				if !errors.Is(err, contract.ErrInvalidRequest) {
					t.Fatalf("CoreLimit(%q) = %d, %v, %v; want ErrInvalidRequest", *tt.value, got, ok, err)
				}
				// the request parser (the extender's Filter, the plugin's Allocate) refuses it too
				if _, err := contract.ParseRequest(pod, &names); !errors.Is(err, contract.ErrInvalidRequest) {
					t.Errorf("ParseRequest with %s=%q: error %v, want ErrInvalidRequest", contract.DefaultCoreKey, *tt.value, err)
				}
				return
			}
			if err != nil || got != tt.want || ok != tt.wantOK {
				t.Fatalf("CoreLimit() = %d, %v, %v; want %d, %v, nil", got, ok, err, tt.want, tt.wantOK)
			}
		})
	}
}

func ptr(s string) *string { return &s }
