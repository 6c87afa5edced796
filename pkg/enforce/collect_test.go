package enforce

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/enforce/fake"
)

func TestCollectsGonePods(t *testing.T) {
	cfg := limitConfig(t, t.TempDir())
	h := newHAMiCore(t, cfg, &fake.Mounter{})
	for _, uid := range []string{"uid-live", "uid-gone", "uid-young"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, podsDir, uid, "c"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	old := now.Add(-2 * DefaultCollectAfter)
	for _, uid := range []string{"uid-live", "uid-gone"} {
		if err := os.Chtimes(filepath.Join(cfg.StateDir, podsDir, uid), old, old); err != nil {
			t.Fatal(err)
		}
	}
	h.Collect(t.Context(), []types.UID{"uid-live"}, now)
	for uid, want := range map[string]bool{"uid-live": true, "uid-gone": false, "uid-young": true} {
		_, err := os.Stat(filepath.Join(cfg.StateDir, podsDir, uid))
		if got := err == nil; got != want {
			t.Errorf("folder of %s exists = %v, want %v", uid, got, want)
		}
	}
}

// TestCollectUnmountsCounters: a gone pod's counter folders are unmounted before they are
// removed; a folder that cannot be unmounted is kept (and retried on the next pass).
func TestCollectUnmountsCounters(t *testing.T) {
	tests := []struct {
		name          string
		failUnmount   error
		wantUnmounted []string
		wantKept      bool
	}{
		{name: "unmounted, then removed", wantUnmounted: []string{"a", "b"}},
		{name: "unmount fails: kept", failUnmount: unix.EBUSY, wantKept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := limitConfig(t, t.TempDir())
			cfg.CounterSize = DefaultCounterSize
			m := &fake.Mounter{}
			h := newHAMiCore(t, cfg, m)
			gone := filepath.Join(cfg.StateDir, podsDir, "uid-gone")
			for _, c := range []string{"a", "b"} {
				if err := os.MkdirAll(filepath.Join(gone, c), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := h.boundCounters(filepath.Join(gone, c)); err != nil {
					t.Fatal(err)
				}
			}
			old := time.Now().Add(-2 * DefaultCollectAfter)
			if err := os.Chtimes(gone, old, old); err != nil {
				t.Fatal(err)
			}
			m.FailUnmount = tt.failUnmount
			h.Collect(t.Context(), []types.UID{}, time.Now())
			var got []string
			for _, dir := range m.Unmounted {
				got = append(got, filepath.Base(dir))
			}
			if diff := cmp.Diff(tt.wantUnmounted, got); diff != "" {
				t.Errorf("unmounted (-want,+got):\n%s", diff)
			}
			if _, err := os.Stat(gone); (err == nil) != tt.wantKept {
				t.Errorf("gone pod's folder: stat error %v, want kept %v", err, tt.wantKept)
			}
		})
	}
}
