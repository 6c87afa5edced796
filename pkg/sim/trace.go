package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/gpumem"
)

// MilliPerGPU is the units of one card in the simulator: openb's gpu_milli.
const MilliPerGPU = 1000

// ErrBadTrace is wrapped by every trace parsing error.
var ErrBadTrace = errors.New("bad trace")

// Node is one row of openb_node_list_gpu_node.csv.
type Node struct {
	// Name is the node's serial name (sn).
	Name string
	// MilliCPU and MemoryMiB are the node's allocatable CPU and memory.
	MilliCPU, MemoryMiB int64
	// GPUs is the number of cards, each MilliPerGPU units.
	GPUs int
	// Model is the cards' model, e.g. "T4".
	Model string
	// Links is the link matrix of the cards, Links[a][b] between cards a and b; nil: none (the
	// trace has none; see WithSyntheticTopology).
	Links [][]contract.Link
}

// Pod is one row of an openb pod list.
type Pod struct {
	// Name is the pod's name.
	Name string
	// MilliCPU and MemoryMiB are the pod's requests.
	MilliCPU, MemoryMiB int64
	// NumGPU is the number of cards; GPUMilli the units on each (1000 for whole cards).
	NumGPU, GPUMilli int64
	// Models are the accepted card models (gpu_spec); empty means any.
	Models []string
	// QoS is the pod's qos class (Guaranteed, LS, Burstable or BE), empty when the trace has no
	// qos column; QoSPriority maps it to a priority with --preemption.
	QoS string
}

// GPURequest is the pod's total GPU ask in milli-GPU.
func (p *Pod) GPURequest() int64 { return p.NumGPU * p.GPUMilli }

// ReadNodes parses a node CSV (sn, cpu_milli, memory_mib, gpu, model).
func ReadNodes(r io.Reader) ([]Node, error) {
	var out []Node
	err := readCSV(r, []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"}, func(f map[string]string) error {
		n := Node{Name: f["sn"], Model: f["model"]}
		var gpus int64
		if err := parseInts(f, map[string]*int64{"cpu_milli": &n.MilliCPU, "memory_mib": &n.MemoryMiB, "gpu": &gpus}); err != nil {
			return err
		}
		n.GPUs = int(gpus)
		out = append(out, n)
		return nil
	})
	return out, err
}

// ReadPods parses a pod CSV (name, cpu_milli, memory_mib, num_gpu, gpu_milli and, when
// present, gpu_spec and qos).
func ReadPods(r io.Reader) ([]Pod, error) {
	var out []Pod
	err := readCSV(r, []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}, func(f map[string]string) error {
		p := Pod{Name: f["name"], Models: gpumem.ParseModels(f["gpu_spec"]), QoS: f["qos"]}
		if err := parseInts(f, map[string]*int64{"cpu_milli": &p.MilliCPU, "memory_mib": &p.MemoryMiB,
			"num_gpu": &p.NumGPU, "gpu_milli": &p.GPUMilli}); err != nil {
			return err
		}
		if p.NumGPU < 0 || p.GPUMilli < 0 || p.GPUMilli > MilliPerGPU || (p.NumGPU > 1 && p.GPUMilli != MilliPerGPU) {
			return fmt.Errorf("%w: pod %s asks %d GPUs of %d milli", ErrBadTrace, p.Name, p.NumGPU, p.GPUMilli)
		}
		if p.GPUMilli == 0 {
			p.NumGPU = 0
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// readCSV calls row for each record with its fields by header name; want lists required columns,
// and optional columns are passed when present.
func readCSV(r io.Reader, want []string, row func(map[string]string) error) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("%w: header: %w", ErrBadTrace, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, w := range want {
		if _, ok := col[w]; !ok {
			return fmt.Errorf("%w: no column %q", ErrBadTrace, w)
		}
	}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrBadTrace, line, err)
		}
		f := make(map[string]string, len(col))
		for name, i := range col {
			if i < len(rec) {
				f[name] = rec[i]
			}
		}
		if err := row(f); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
}

func parseInts(f map[string]string, into map[string]*int64) error {
	for k, p := range into {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %s=%q: %w", ErrBadTrace, k, f[k], err)
		}
		*p = v
	}
	return nil
}
