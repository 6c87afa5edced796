package mockhost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

func TestParseXIDLine(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    XIDLine
		wantErr bool
	}{
		{name: "one card", line: "1 79", want: XIDLine{GPU: 1, XID: 79}},
		{name: "spaces", line: "  0\t48 ", want: XIDLine{GPU: 0, XID: 48}},
		{name: "no card named", line: "all 79", want: XIDLine{GPU: AllGPUs, XID: 79}},
		{name: "index beyond the host", line: "2 79", wantErr: true},
		{name: "negative index", line: "-1 79", wantErr: true},
		{name: "no xid", line: "1", wantErr: true},
		{name: "xid not a number", line: "1 x", wantErr: true},
		{name: "three fields", line: "1 79 80", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseXIDLine(tt.line, 2)
			if tt.wantErr {
				if !errors.Is(err, ErrBadXIDLine) {
					t.Errorf("ParseXIDLine(%q) = %+v, %v; want ErrBadXIDLine", tt.line, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseXIDLine(%q) (-want,+got):\n%s", tt.line, diff)
			}
		})
	}
}

// TestFollowXIDFile: every complete line appended to the file is one event, once; bad, blank
// and comment lines are none, and a line is injected only once it ends.
func TestFollowXIDFile(t *testing.T) {
	h, err := New("dgxa100", Options{GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "xids")
	h.FollowXIDFile(path)
	set, ret := h.EventSetCreate()
	if ret != gonvml.SUCCESS {
		t.Fatalf("EventSetCreate: %v", ret)
	}
	if _, ret := set.Wait(10); ret != gonvml.ERROR_TIMEOUT {
		t.Fatalf("Wait without a file = %v, want a timeout", ret)
	}
	appendTo(t, path, "# injected by the test\n1 79\n\nbad line\n0 13\nall 48\n1 4")
	var got []string
	for range 3 {
		ev, ret := set.Wait(5000)
		if ret != gonvml.SUCCESS {
			t.Fatalf("Wait = %v, want an event (got %v so far)", ret, got)
		}
		got = append(got, eventString(h, ev))
	}
	if diff := cmp.Diff([]string{"GPU 1 XID 79", "GPU 0 XID 13", "all XID 48"}, got); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	if ev, ret := set.Wait(200); ret != gonvml.ERROR_TIMEOUT {
		t.Fatalf("Wait before the last line ends = %s, %v; want a timeout", eventString(h, ev), ret)
	}
	appendTo(t, path, "3\n")
	if ev, ret := set.Wait(5000); ret != gonvml.SUCCESS || eventString(h, ev) != "GPU 1 XID 43" {
		t.Fatalf("Wait after the line ended = %s, %v; want GPU 1 XID 43", eventString(h, ev), ret)
	}
	if ev, ret := set.Wait(200); ret != gonvml.ERROR_TIMEOUT {
		t.Errorf("Wait after every line = %s, %v; want a timeout (each line once)", eventString(h, ev), ret)
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// eventString renders an event as "GPU <index> XID <xid>", "all XID <xid>" without a device.
func eventString(h *Host, ev gonvml.EventData) string {
	for i, d := range h.Devices {
		if d == ev.Device {
			return fmt.Sprintf("GPU %d XID %d", i, ev.EventData)
		}
	}
	return fmt.Sprintf("all XID %d", ev.EventData)
}
