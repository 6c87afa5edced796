package preempt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestHoldMAC: a record verifies under the key and for the pod it was signed for, and only
// unchanged: any field changed, another pod's UID, another key, no MAC or garbage fail.
func TestHoldMAC(t *testing.T) {
	key := []byte(strings.Repeat("k", MinHoldKeyBytes))
	signed := func() HoldRecord {
		rec := HoldRecord{Node: "n1", GPU: 1, Units: 8, Until: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), Victims: []string{"default/a", "default/b"}}
		rec.MAC = holdMAC(key, "uid-p", &rec)
		return rec
	}
	tests := []struct {
		name   string
		change func(*HoldRecord, *types.UID, *[]byte)
		want   bool
	}{
		{name: "as signed", change: func(*HoldRecord, *types.UID, *[]byte) {}, want: true},
		{name: "more units", change: func(r *HoldRecord, _ *types.UID, _ *[]byte) { r.Units = 16 }},
		{name: "another card", change: func(r *HoldRecord, _ *types.UID, _ *[]byte) { r.GPU = 0 }},
		{name: "another node", change: func(r *HoldRecord, _ *types.UID, _ *[]byte) { r.Node = "n2" }},
		{name: "later", change: func(r *HoldRecord, _ *types.UID, _ *[]byte) { r.Until = r.Until.Add(time.Hour) }},
		{name: "other victims", change: func(r *HoldRecord, _ *types.UID, _ *[]byte) { r.Victims = []string{"default/a"} }},
		{name: "victim names run together", change: func(r *HoldRecord, _ *types.UID, _ *[]byte) { r.Victims = []string{"default/adefault/b"} }},
		{name: "copied onto another pod", change: func(_ *HoldRecord, uid *types.UID, _ *[]byte) { *uid = "uid-other" }},
		{name: "another key", change: func(_ *HoldRecord, _ *types.UID, k *[]byte) { *k = []byte(strings.Repeat("o", MinHoldKeyBytes)) }},
		{name: "no MAC", change: func(r *HoldRecord, _ *types.UID, _ *[]byte) { r.MAC = "" }},
		{name: "garbage MAC", change: func(r *HoldRecord, _ *types.UID, _ *[]byte) { r.MAC = "not base64!" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, uid, k := signed(), types.UID("uid-p"), key
			tt.change(&rec, &uid, &k)
			if got := verifyHold(k, uid, &rec); got != tt.want {
				t.Errorf("verifyHold() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLoadHoldKey: the key file's bytes as they are, at least MinHoldKeyBytes of them.
func TestLoadHoldKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("x", n-1)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		wantLen int
		wantErr error // nil: any error when wantLen is 0
	}{
		{name: "32 bytes", path: write("ok", 32), wantLen: 32},
		{name: "48 bytes (the chart's randAlphaNum 48)", path: write("chart", 48), wantLen: 48},
		{name: "31 bytes", path: write("short", 31), wantErr: ErrHoldKeyTooShort},
		{name: "a newline", path: write("newline", 1), wantErr: ErrHoldKeyTooShort},
		{name: "too large", path: write("large", maxHoldKeyBytes+1)},
		{name: "missing", path: filepath.Join(dir, "missing"), wantErr: os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := LoadHoldKey(tt.path)
			if tt.wantLen > 0 {
				if err != nil || len(key) != tt.wantLen {
					t.Fatalf("LoadHoldKey() = %d bytes, %v; want %d bytes", len(key), err, tt.wantLen)
				}
				return
			}
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("LoadHoldKey() error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
