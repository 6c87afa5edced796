package framework

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{name: "plain", stat: "42 (etcd) S 1 42 42 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 12 0 100 0 0",
			want: 3800 * time.Millisecond},
		{name: "command with spaces and parentheses", stat: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0",
			want: 30 * time.Millisecond},
		{name: "truncated", stat: "7 (x) R 1 7", wantErr: true},
		{name: "no command", stat: "garbage", wantErr: true},
		{name: "not a number", stat: "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 2 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.stat)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStatCPU() error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseStatCPU() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCPUTimeOfThisProcess(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	after, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 100*time.Millisecond {
		t.Errorf("a 300 ms busy loop added %v of CPU time, want at least 100 ms", after-before)
	}
}

func TestMemoryKiBOfThisProcess(t *testing.T) {
	rss, err := MemoryKiB(os.Getpid(), "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	peak, err := MemoryKiB(os.Getpid(), "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || peak < rss {
		t.Errorf("VmRSS %d KiB, VmHWM %d KiB: want 0 < RSS <= peak", rss, peak)
	}
	if _, err := MemoryKiB(os.Getpid(), "NoSuchField"); err == nil {
		t.Error("MemoryKiB(NoSuchField) = nil error, want one")
	}
}
