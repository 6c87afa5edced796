package contract_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/contract"
)

// TestDecodeGPUsRefusesOneCardTwice: an inventory that names one card (UUID) under two
// indexes is refused, as a repeated index is: the extender would count it as two cards.
func TestDecodeGPUsRefusesOneCardTwice(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr bool
	}{
		{name: "distinct UUIDs", raw: `[{"index":0,"uuid":"GPU-a","units":15},{"index":1,"uuid":"GPU-b","units":15}]`},
		{name: "cards without UUIDs are not compared", raw: `[{"index":0,"units":15},{"index":1,"units":15}]`},
		{name: "one UUID under two indexes", raw: `[{"index":0,"uuid":"GPU-a","units":15},{"index":1,"uuid":"GPU-a","units":15}]`, wantErr: true},
		{name: "repeated index", raw: `[{"index":0,"uuid":"GPU-a","units":15},{"index":0,"uuid":"GPU-b","units":15}]`, wantErr: true},
		{name: "negative total", raw: `[{"index":0,"units":15,"memoryBytes":-1}]`, wantErr: true},
		{name: "negative reserve", raw: `[{"index":0,"units":15,"reservedBytes":-1}]`, wantErr: true},
		{name: "negative usable", raw: `[{"index":0,"units":15,"usableBytes":-1}]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := contract.DecodeGPUs(tt.raw)
			if tt.wantErr {
				if !errors.Is(err, contract.ErrInvalidInventory) || got != nil {
					t.Errorf("DecodeGPUs(%s) = %v, %v; want ErrInvalidInventory", tt.raw, got, err)
				}
				return
			}
			if err != nil {
				t.Errorf("DecodeGPUs(%s) = %v", tt.raw, err)
			}
		})
	}
}

// TestGPUMemoryWire: the memory figures travel as memoryBytes, reservedBytes and usableBytes,
// and are absent when zero (plugins older than the fields).
func TestGPUMemoryWire(t *testing.T) {
	t4 := contract.GPU{Index: 0, UUID: "GPU-a", Model: "Tesla T4", Units: 14, Healthy: true,
		MemoryBytes: 15 << 30, ReservedBytes: 450 << 20, UsableBytes: 15<<30 - 450<<20}
	raw, err := contract.EncodeGPUs([]contract.GPU{t4, {Index: 1, UUID: "GPU-b", Units: 16}})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"index":0,"uuid":"GPU-a","model":"Tesla T4","units":14,"memoryBytes":16106127360,"reservedBytes":471859200,"usableBytes":15634268160,"healthy":true},` +
		`{"index":1,"uuid":"GPU-b","model":"","units":16,"healthy":false}]`
	if diff := cmp.Diff(want, raw); diff != "" {
		t.Errorf("EncodeGPUs (-want,+got):\n%s", diff)
	}
	back, err := contract.DecodeGPUs(raw)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(t4, back[0]); diff != "" {
		t.Errorf("round trip (-want,+got):\n%s", diff)
	}
}
