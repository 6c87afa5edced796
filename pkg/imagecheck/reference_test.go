package imagecheck

import "testing"

func TestNormalizeRef(t *testing.T) {
	tests := []struct{ in, want string }{
		{"busybox", "docker.io/library/busybox:latest"},
		{"busybox:1.36", "docker.io/library/busybox:1.36"},
		{"nvidia/cuda:12.4.0-base", "docker.io/nvidia/cuda:12.4.0-base"},
		{"docker.io/busybox", "docker.io/library/busybox:latest"},
		{"registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"},
		{"localhost/gpushare/e2e:1", "localhost/gpushare/e2e:1"},
		{"localhost:5000/app", "localhost:5000/app:latest"},
		{"ghcr.io/a/b@sha256:abcd", "ghcr.io/a/b@sha256:abcd"},
		{"busybox@sha256:abcd", "docker.io/library/busybox@sha256:abcd"},
		{"sha256:0123", "sha256:0123"},
	}
	for _, tt := range tests {
		got, err := normalizeRef(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("normalizeRef(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "a b"} {
		if _, err := normalizeRef(bad); err == nil {
			t.Errorf("normalizeRef(%q): no error", bad)
		}
	}
}
