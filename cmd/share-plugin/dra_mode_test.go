package main

import (
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/enforce"
)

// TestDRAConfigFromFlags: DRA mode gets every flag it reads, its own and the shared ones.
func TestDRAConfigFromFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "n7")
	o := newOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--mode=dra", "--driver-name=gpu.example.com", "--cdi-root=/etc/cdi", "--kubelet-plugins-dir=/k/plugins",
		"--kubelet-registry-dir=/k/registry", "--dra-device-order=most-allocated", "--unit=256Mi", "--reserve-memory=1Gi",
		"--sysfs-root=/host/sys", "--health-check=false", "--health-ignored-xids=13", "--memory-limit=hami-core",
		"--hami-core-state-dir=/s"}); err != nil {
		t.Fatal(err)
	}
	want := dra.DefaultConfig()
	want.DriverName, want.NodeName, want.CDIRoot, want.PluginsDir, want.RegistryDir = "gpu.example.com", "n7", "/etc/cdi", "/k/plugins", "/k/registry"
	want.DeviceOrder, want.ReserveMemory, want.SysfsRoot, want.HealthCheck, want.IgnoredXIDs = dra.OrderMostAllocated, 1<<30, "/host/sys", false, []uint64{13}
	want.Names.Unit = resource.MustParse("256Mi")
	want.Enforce.Mode, want.Enforce.StateDir = enforce.ModeHAMiCore, "/s"
	if diff := cmp.Diff(want, o.draConfig(), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("DRA config (-want,+got):\n%s", diff)
	}
}
