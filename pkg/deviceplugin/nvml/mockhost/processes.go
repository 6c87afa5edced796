package mockhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrBadProcessesFile is wrapped by the errors of a processes file that does not parse.
var ErrBadProcessesFile = errors.New("bad fake GPU processes file")

// fileProcess is one process of a processes file.
type fileProcess struct {
	PID       uint32 `json:"pid"`
	UsedBytes uint64 `json:"usedBytes"`
}

// ParseProcesses reads a processes file: the compute processes of each GPU, by NVML index (a
// string), each with its host PID and the GPU memory it uses:
//
//	{"0": [{"pid": 1234, "usedBytes": 1073741824}], "1": []}
//
// gpus is the number of GPUs of the host; an index outside it, a PID of 0 or an unknown field
// is an error.
func ParseProcesses(data []byte, gpus int) (map[int][]gonvml.ProcessInfo, error) {
	var raw map[string][]fileProcess
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadProcessesFile, err)
	}
	out := make(map[int][]gonvml.ProcessInfo, len(raw))
	for key, procs := range raw {
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i >= gpus {
			return nil, fmt.Errorf("%w: GPU %q: want an NVML index from 0 to %d", ErrBadProcessesFile, key, gpus-1)
		}
		for _, p := range procs {
			if p.PID == 0 {
				return nil, fmt.Errorf("%w: GPU %d: a process without a pid", ErrBadProcessesFile, i)
			}
			out[i] = append(out[i], gonvml.ProcessInfo{Pid: p.PID, UsedGpuMemory: p.UsedBytes})
		}
	}
	return out, nil
}

// processesFile is the state of a followed processes file; Host.mu guards it.
type processesFile struct {
	path string
	// stat is the file as last read (nil: missing or never read).
	stat  fs.FileInfo
	procs map[int][]gonvml.ProcessInfo
	// err is why the file could not be read last time; it is read again at the next call.
	err error
}

// FollowProcessesFile makes the host's GPUs report the compute processes of the file at path
// (ParseProcesses), read again whenever it changes (another modification time, size or file: a
// write or a rename over it). A missing file is no processes; a file that cannot be read or
// parsed fails every GPU's process list (nvml.ERROR_UNKNOWN) until it is fixed, so write it
// whole (to a temporary file, then rename). The processes given to SetUsage are then ignored;
// its utilization still counts.
func (h *Host) FollowProcessesFile(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.file = &processesFile{path: path}
}

// refreshLocked reads the followed file again if it changed; the caller holds h.mu.
func (f *processesFile) refreshLocked(gpus int) {
	st, err := os.Stat(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		f.stat, f.procs, f.err = nil, nil, nil
		return
	}
	if err != nil {
		f.err = err
		return
	}
	if f.err == nil && f.stat != nil && os.SameFile(f.stat, st) && f.stat.ModTime().Equal(st.ModTime()) && f.stat.Size() == st.Size() {
		return
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		f.err = err
		return
	}
	procs, err := ParseProcesses(data, gpus)
	if err != nil {
		f.err = fmt.Errorf("%s: %w", f.path, err)
		return
	}
	f.stat, f.procs, f.err = st, procs, nil
}

// processesOf is GPU i's processes from the followed file, or an error while it is bad.
func (f *processesFile) processesOf(i int) ([]gonvml.ProcessInfo, error) {
	return slices.Clone(f.procs[i]), f.err
}
