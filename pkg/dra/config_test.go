package dra

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/enforce"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(c *Config)
		wantErr string
	}{
		{name: "defaults on a node", change: func(*Config) {}},
		{name: "most allocated first", change: func(c *Config) { c.DeviceOrder = OrderMostAllocated }},
		{name: "MiB units (no device list to overflow in DRA mode)", change: func(c *Config) { c.Names.Unit = resource.MustParse("1Mi") }},
		{name: "no node", change: func(c *Config) { c.NodeName = "" }, wantErr: "node name is empty"},
		{name: "driver name not a DNS subdomain", change: func(c *Config) { c.DriverName = "GPU_share" }, wantErr: "must be a DNS subdomain"},
		{name: "driver name starting with a digit (not a CDI vendor)", change: func(c *Config) { c.DriverName = "1gpu.example.com" }, wantErr: "starts with a letter"},
		{name: "no driver name", change: func(c *Config) { c.DriverName = "" }, wantErr: "must be a DNS subdomain"},
		{name: "driver name too long", change: func(c *Config) { c.DriverName = strings.Repeat("a", 61) + ".io" }, wantErr: "at most 63"},
		{name: "unknown order", change: func(c *Config) { c.DeviceOrder = "random" }, wantErr: `device order "random": want one of index, most-allocated`},
		{name: "relative CDI root", change: func(c *Config) { c.CDIRoot = "var/run/cdi" }, wantErr: "CDI root"},
		{name: "negative reserve", change: func(c *Config) { c.ReserveMemory = -1 }, wantErr: "negative"},
		{name: "unit below 1Mi", change: func(c *Config) { c.Names.Unit = resource.MustParse("512Ki") }, wantErr: "unit"},
		{name: "bad memory limit mode", change: func(c *Config) { c.Enforce.Mode = "mps" }, wantErr: "memory limit mode"},
		{name: "HAMi-core with the default paths", change: func(c *Config) { c.Enforce.Mode = enforce.ModeHAMiCore }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.NodeName = "n1"
			tt.change(&c)
			err := c.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestNewRefusesCardWithoutUnit: a card the reserves leave less than one unit of is a
// configuration error, as in device-plugin mode.
func TestNewRefusesCardWithoutUnit(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ReserveMemory = 39*gib + 600*mib
	td := testHost(t)
	_, err := New(t.Context(), nvml.New(td), nil, cfg)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "leave less than one unit") {
		t.Errorf("New = %v, want an error wrapping %v about the reserve", err, ErrInvalidConfig)
	}
}
