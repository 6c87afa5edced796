package enforce

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "none", cfg: DefaultConfig()},
		{name: "hami-core with the default paths", cfg: Config{Mode: ModeHAMiCore, Library: DefaultHAMiCoreLibrary, StateDir: DefaultStateDir}},
		{name: "unknown mode", cfg: Config{Mode: "mps"}, wantErr: `memory limit mode "mps"`},
		{name: "library path not absolute", cfg: Config{Mode: ModeHAMiCore, Library: "lib/libvgpu.so", StateDir: "/s"}, wantErr: "absolute, clean path"},
		{name: "library path not clean", cfg: Config{Mode: ModeHAMiCore, Library: "/a/../libvgpu.so", StateDir: "/s"}, wantErr: "absolute, clean path"},
		{name: "empty library", cfg: Config{Mode: ModeHAMiCore, StateDir: "/s"}, wantErr: "absolute, clean path"},
		{name: "state folder not absolute", cfg: Config{Mode: ModeHAMiCore, Library: "/l.so", StateDir: "state"}, wantErr: "absolute, clean path"},
		{name: "install source not absolute", cfg: Config{Mode: ModeHAMiCore, Library: "/l.so", StateDir: "/s", InstallFrom: "l.so"}, wantErr: "must be an absolute path"},
		{name: "library where the counters go", cfg: Config{Mode: ModeHAMiCore, Library: ContainerCacheDir + "/l.so", StateDir: "/s"}, wantErr: "collides"},
		{name: "library over the preload file", cfg: Config{Mode: ModeHAMiCore, Library: ContainerPreloadPath, StateDir: "/s"}, wantErr: "collides"},
		{name: "negative collect-after", cfg: Config{Mode: ModeHAMiCore, Library: "/l.so", StateDir: "/s", CollectAfter: -1}, wantErr: "negative"},
		{name: "counter folders bounded", cfg: Config{Mode: ModeHAMiCore, Library: "/l.so", StateDir: "/s", CounterSize: DefaultCounterSize}},
		{name: "counter folders at the smallest bound", cfg: Config{Mode: ModeHAMiCore, Library: "/l.so", StateDir: "/s", CounterSize: MinCounterSize}},
		{name: "counter folders smaller than HAMi-core's file", cfg: Config{Mode: ModeHAMiCore, Library: "/l.so", StateDir: "/s", CounterSize: 64 << 10}, wantErr: "counter size 65536 bytes"},
		{name: "negative counter size", cfg: Config{Mode: ModeHAMiCore, Library: "/l.so", StateDir: "/s", CounterSize: -1}, wantErr: "counter size -1 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
