package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		args    []string
		wantErr string
	}{
		{name: "node from NODE_NAME", env: "n1"},
		{name: "flag wins over env", env: "n1", args: []string{"--node-name=n2"}},
		{name: "no node", wantErr: "--node-name"},
		{name: "unit too small", env: "n1", args: []string{"--unit=512Ki"}, wantErr: "unit"},
		{name: "bad resync", env: "n1", args: []string{"--resync-period=0s"}, wantErr: "--resync-period"},
		{name: "metrics without a usage period", env: "n1", args: []string{"--usage-period=0s"}, wantErr: "--usage-period"},
		{name: "metrics off: the usage period is not used", env: "n1", args: []string{"--metrics-address=", "--usage-period=0s"}},
		{name: "HAMi-core with the default paths", env: "n1", args: []string{"--memory-limit=hami-core"}},
		{name: "HAMi-core library path not absolute", env: "n1", args: []string{"--memory-limit=hami-core", "--hami-core-library=libvgpu.so"}, wantErr: "absolute"},
		{name: "HAMi-core state folder not absolute", env: "n1", args: []string{"--memory-limit=hami-core", "--hami-core-state-dir=var/lib"}, wantErr: "absolute"},
		{name: "sysfs elsewhere", env: "n1", args: []string{"--sysfs-root=/host/sys"}},
		{name: "no sysfs root", env: "n1", args: []string{"--sysfs-root="}, wantErr: "--sysfs-root"},
		{name: "unknown memory limit mode", env: "n1", args: []string{"--memory-limit=mps"}, wantErr: "memory limit mode"},
		{name: "image check off", env: "n1", args: []string{"--memory-limit=hami-core", "--image-check=none", "--containerd-socket="}},
		{name: "image check through containerd", env: "n1", args: []string{"--memory-limit=hami-core", "--image-check=containerd", "--host-root=/proc/1/root"}},
		{name: "unknown image check", env: "n1", args: []string{"--image-check=crio"}, wantErr: "--image-check must be"},
		{name: "image check without a socket", env: "n1", args: []string{"--containerd-socket="}, wantErr: "--containerd-socket"},
		{name: "image check with a relative host root", env: "n1", args: []string{"--host-root=proc/1/root"}, wantErr: "--host-root"},
		{name: "escapes reported only", env: "n1", args: []string{"--memory-limit=hami-core", "--limit-escape-action=none", "--limit-escape-allowance=1Gi"}},
		{name: "allowance in bytes", env: "n1", args: []string{"--limit-escape-allowance=536870912"}},
		{name: "no allowance", env: "n1", args: []string{"--limit-escape-allowance=0"}},
		{name: "evict is not offered", env: "n1", args: []string{"--limit-escape-action=evict"}, wantErr: "--limit-escape-action"},
		{name: "negative allowance", env: "n1", args: []string{"--limit-escape-allowance=-1Mi"}, wantErr: "--limit-escape-allowance"},
		{name: "limits enforced: escapes caught within 5s", env: "n1", args: []string{"--memory-limit=hami-core", "--usage-period=10s"}, wantErr: "at most 5s"},
		{name: "limits enforced without metrics: the period is still used", env: "n1", args: []string{"--memory-limit=hami-core", "--metrics-address=", "--usage-period=0s"}, wantErr: "--usage-period"},
		{name: "no limits: a long period is fine", env: "n1", args: []string{"--usage-period=30s"}},
		{name: "memory held back of every card", env: "n1", args: []string{"--reserve-memory=512Mi", "--health-ignored-xids=13,109"}},
		{name: "DRA mode", env: "n1", args: []string{"--mode=dra", "--memory-limit=hami-core", "--dra-device-order=most-allocated"}},
		{name: "DRA mode with MiB units", env: "n1", args: []string{"--mode=dra", "--unit=1Mi", "--driver-name=gpu.example.com", "--cdi-root=/etc/cdi"}},
		{name: "unknown mode", env: "n1", args: []string{"--mode=mig"}, wantErr: "--mode must be device-plugin or dra"},
		{name: "DRA mode, unknown device order", env: "n1", args: []string{"--mode=dra", "--dra-device-order=random"}, wantErr: `device order "random"`},
		{name: "DRA mode, bad driver name", env: "n1", args: []string{"--mode=dra", "--driver-name=GPU_share"}, wantErr: "DNS subdomain"},
		{name: "DRA mode, relative CDI root", env: "n1", args: []string{"--mode=dra", "--cdi-root=var/run/cdi"}, wantErr: "CDI root"},
		{name: "DRA mode without a node", args: []string{"--mode=dra"}, wantErr: "node name is empty"},
		{name: "device-plugin mode ignores a bad device order", env: "n1", args: []string{"--dra-device-order=random"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NODE_NAME", tt.env)
			o := newOptions()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o.addFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("validate() = %v, want error containing %q", err, tt.wantErr)
			}
			if err == nil && len(o.pluginOptions()) == 0 {
				t.Error("no plugin options")
			}
		})
	}
}
