package contract_test

import (
	"errors"
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/contract"
)

func TestNamesFlagsAndValidate(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantLabel string
		wantErr   bool
	}{
		{name: "defaults", wantLabel: "GiB"},
		{name: "MiB", args: []string{"--unit=1Mi"}, wantLabel: "MiB"},
		{name: "256Mi", args: []string{"--unit=256Mi"}, wantLabel: "x256Mi"},
		{name: "below a MiB", args: []string{"--unit=1Ki"}, wantErr: true},
		{name: "not whole MiB", args: []string{"--unit=1500Ki"}, wantErr: true},
		{name: "empty resource", args: []string{"--resource-name="}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := contract.DefaultNames()
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			n.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := n.Validate()
			if tt.wantErr {
				if !errors.Is(err, contract.ErrInvalidNames) {
					t.Fatalf("Validate() = %v, want ErrInvalidNames", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if got := n.UnitLabel(); got != tt.wantLabel {
				t.Errorf("UnitLabel() = %q, want %q", got, tt.wantLabel)
			}
		})
	}
}

func TestCheckDeviceCount(t *testing.T) {
	mib := contract.DefaultNames()
	if err := mib.Unit.UnmarshalJSON([]byte(`"1Mi"`)); err != nil {
		t.Fatal(err)
	}
	// An 80 GiB card in MiB units is 81,920 devices: too many for one ListAndWatch message.
	if err := mib.CheckDeviceCount(mib.UnitsOf(80 << 30)); !errors.Is(err, contract.ErrInvalidNames) {
		t.Errorf("CheckDeviceCount(80 GiB in MiB) = %v, want ErrInvalidNames", err)
	}
	gib := contract.DefaultNames()
	if err := gib.CheckDeviceCount(gib.UnitsOf(80 << 30)); err != nil {
		t.Errorf("CheckDeviceCount(80 GiB in GiB) = %v", err)
	}
}

func TestDecodeGPUs(t *testing.T) {
	gpus := []contract.GPU{{Index: 1, UUID: "b", Model: "T4", Units: 16, Healthy: false}, {Index: 0, UUID: "a", Model: "T4", Units: 15, Healthy: true}}
	raw, err := contract.EncodeGPUs(gpus)
	if err != nil {
		t.Fatal(err)
	}
	got, err := contract.DecodeGPUs(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := []contract.GPU{gpus[1], gpus[0]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want,+got):\n%s", diff)
	}
	for _, bad := range []string{"garbage", `[{"index":-1}]`, `[{"index":0},{"index":0}]`, `[{"index":0,"units":-3}]`} {
		if _, err := contract.DecodeGPUs(bad); !errors.Is(err, contract.ErrInvalidInventory) {
			t.Errorf("DecodeGPUs(%s) = %v, want ErrInvalidInventory", bad, err)
		}
	}
}
