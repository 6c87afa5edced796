package benchrun

import (
	"bytes"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	loggerTo(&buf, "bench", func() time.Time { return at })("%d bound, %s", 3, "ok")
	if diff := cmp.Diff("[bench 03:04:05] 3 bound, ok\n", buf.String()); diff != "" {
		t.Errorf("log line (-want,+got):\n%s", diff)
	}
}

func TestExtenderArgs(t *testing.T) {
	tests := []struct {
		name    string
		extra   string
		profile bool
		more    []string
		want    []string
	}{
		{name: "none", want: []string{"--v=1"}},
		{name: "extra flags", extra: " --policy=spread  --filter-chooses-node=false", want: []string{"--v=1", "--policy=spread", "--filter-chooses-node=false"}},
		{name: "more flags", extra: "--policy=spread", more: []string{"--leader-elect=true"}, want: []string{"--v=1", "--policy=spread", "--leader-elect=true"}},
		{name: "profiling last", extra: "--policy=spread", profile: true, more: []string{"--leader-elect=true"},
			want: []string{"--v=1", "--policy=spread", "--leader-elect=true", "--profiling-address="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, addr, err := ExtenderArgs(tt.extra, tt.profile, tt.more...)
			if err != nil {
				t.Fatal(err)
			}
			if tt.profile {
				if !strings.HasPrefix(addr, "127.0.0.1:") || args[len(args)-1] != "--profiling-address="+addr {
					t.Errorf("profiling address %q, args %q", addr, args)
				}
				args[len(args)-1] = "--profiling-address="
			} else if addr != "" {
				t.Errorf("profiling address %q without profiling", addr)
			}
			if diff := cmp.Diff(tt.want, args); diff != "" {
				t.Errorf("args (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParallel(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		n       int
		failAt  int
		wantErr error
	}{
		{name: "all", n: 100, failAt: -1},
		{name: "none", n: 0, failAt: -1},
		{name: "first error", n: 100, failAt: 7, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			err := Parallel(tt.n, 4, func(i int) error {
				calls.Add(1)
				if i == tt.failAt {
					return boom
				}
				return nil
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Parallel = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && calls.Load() != int64(tt.n) {
				t.Errorf("%d calls, want %d", calls.Load(), tt.n)
			}
		})
	}
}
