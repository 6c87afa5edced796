package mockhost

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrBadXIDLine is wrapped by the errors of an XID file line that does not parse.
var ErrBadXIDLine = errors.New("bad fake XID line")

// AllGPUs is the GPU of an XIDLine that names no card (NVML's event without a device).
const AllGPUs = -1

// XIDLine is one critical XID of an XID file.
type XIDLine struct {
	// GPU is the NVML index of the card, or AllGPUs.
	GPU int
	// XID is the Xid code.
	XID uint64
}

// ParseXIDLine reads one line of an XID file: "<NVML index> <xid>", or "all <xid>" for an
// event that names no card. gpus is the number of GPUs of the host.
func ParseXIDLine(line string, gpus int) (XIDLine, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return XIDLine{}, fmt.Errorf("%w %q: want \"<NVML index|all> <xid>\"", ErrBadXIDLine, line)
	}
	xid, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return XIDLine{}, fmt.Errorf("%w %q: xid: %w", ErrBadXIDLine, line, err)
	}
	if f[0] == "all" {
		return XIDLine{GPU: AllGPUs, XID: xid}, nil
	}
	i, err := strconv.Atoi(f[0])
	if err != nil || i < 0 || i >= gpus {
		return XIDLine{}, fmt.Errorf("%w %q: want an NVML index from 0 to %d, or all", ErrBadXIDLine, line, gpus-1)
	}
	return XIDLine{GPU: i, XID: xid}, nil
}

// xidFile is the state of a followed XID file; Host.mu guards it.
type xidFile struct {
	path string
	// offset is how many bytes of the file were injected: the complete lines before it.
	offset int64
}

// FollowXIDFile makes the host inject a critical XID event for every complete line appended to
// the file at path (ParseXIDLine), once each, while an event set waits. Lines already there when
// the wait starts count as appended: write the file only by appending. A line that does not
// parse, or an empty or "#" line, injects nothing; a file that shrank is read again from its
// start. For tests and the fakenvml share-plugin (--fake-gpu-xid-file), which cannot call
// InjectXID from outside the process.
func (h *Host) FollowXIDFile(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.xids = &xidFile{path: path}
}

// following reports whether an XID file is followed.
func (h *Host) following() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.xids != nil
}

// pollXIDs injects the events of the lines appended to the followed XID file since the last
// call. The events channel is buffered; lines beyond its room wait for the next call.
func (h *Host) pollXIDs() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.xids == nil {
		return
	}
	lines, next := h.xids.read()
	for _, l := range lines {
		x, err := ParseXIDLine(l.text, len(h.Devices))
		if err != nil {
			continue
		}
		ev := gonvml.EventData{EventType: gonvml.EventTypeXidCriticalError, EventData: x.XID}
		if x.GPU != AllGPUs {
			ev.Device = h.Devices[x.GPU]
		}
		select {
		case h.events <- ev:
		default: // full: this line and the rest next time
			h.xids.offset = l.start
			return
		}
	}
	h.xids.offset = next
}

// xidLine is one complete line of the XID file and where it starts.
type xidLine struct {
	text  string
	start int64
}

// read returns the complete lines after the offset (blank and "#" lines left out) and the
// offset after the last one; a missing or unreadable file is no lines.
func (f *xidFile) read() ([]xidLine, int64) {
	file, err := os.Open(f.path)
	if err != nil {
		return nil, f.offset
	}
	defer func() { _ = file.Close() }()
	st, err := file.Stat()
	if err != nil {
		return nil, f.offset
	}
	if st.Size() < f.offset {
		f.offset = 0 // rewritten shorter: start again
	}
	data, err := io.ReadAll(io.NewSectionReader(file, f.offset, st.Size()-f.offset))
	if err != nil {
		return nil, f.offset
	}
	var out []xidLine
	pos := f.offset
	for {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			break
		}
		text := strings.TrimSpace(string(data[:nl]))
		if text != "" && !strings.HasPrefix(text, "#") {
			out = append(out, xidLine{text: text, start: pos})
		}
		pos += int64(nl) + 1
		data = data[nl+1:]
	}
	return out, pos
}
