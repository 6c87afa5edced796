package fake

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMounter(t *testing.T) {
	dir := t.TempDir()
	boom := errors.New("boom")
	tests := []struct {
		name          string
		m             *Mounter
		dir           string
		wantMountErr  bool
		wantMounted   map[string]int64
		wantUnmounted []string
	}{
		{name: "mount, then unmount", m: &Mounter{}, dir: dir, wantMounted: map[string]int64{}, wantUnmounted: []string{dir}},
		{name: "missing folder", m: &Mounter{}, dir: filepath.Join(dir, "gone"), wantMountErr: true, wantUnmounted: []string{filepath.Join(dir, "gone")}},
		{name: "mount fails", m: &Mounter{FailMount: boom}, dir: dir, wantMountErr: true, wantUnmounted: []string{dir}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.Mount(tt.dir, 4096); (err != nil) != tt.wantMountErr {
				t.Fatalf("Mount = %v, want error %v", err, tt.wantMountErr)
			}
			if err := tt.m.Unmount(tt.dir); err != nil {
				t.Fatalf("Unmount: %v", err)
			}
			if diff := cmp.Diff(tt.wantMounted, tt.m.Mounted); diff != "" {
				t.Errorf("mounted (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantUnmounted, tt.m.Unmounted); diff != "" {
				t.Errorf("unmounted (-want,+got):\n%s", diff)
			}
		})
	}
}
