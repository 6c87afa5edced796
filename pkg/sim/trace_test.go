package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadPods(t *testing.T) {
	tests := []struct {
		name    string
		csv     string
		want    []Pod
		wantErr error
	}{
		{"classes", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n" +
			"p0,12000,16384,1,1000,,LS\np1,6000,12288,1,460,T4|P100,LS\np2,1000,512,0,0,,BE\n",
			[]Pod{{Name: "p0", MilliCPU: 12000, MemoryMiB: 16384, NumGPU: 1, GPUMilli: 1000, QoS: "LS"},
				{Name: "p1", MilliCPU: 6000, MemoryMiB: 12288, NumGPU: 1, GPUMilli: 460, Models: []string{"T4", "P100"}, QoS: "LS"},
				{Name: "p2", MilliCPU: 1000, MemoryMiB: 512, QoS: "BE"}}, nil},
		{"fractional multi-GPU refused", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1,1,2,500,\n", nil, ErrBadTrace},
		{"missing column", "name,cpu_milli\np,1\n", nil, ErrBadTrace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadPods(strings.NewReader(tt.csv))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadPods (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWorkload(t *testing.T) {
	pods := []Pod{{Name: "a", NumGPU: 1, GPUMilli: 500}, {Name: "b", NumGPU: 1, GPUMilli: 1000}, {Name: "c"}}
	tests := []struct {
		name      string
		target    int64
		wantTotal int64
		wantMin   int
	}{
		{"inflated up to the target", 5000, 5000, 3},
		{"inflation stops before overshooting", 5200, 5000, 3},
		{"deflated below the target", 1000, 1000, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Workload(pods, tt.target, newRand(42))
			var total int64
			for i := range got {
				total += got[i].GPURequest()
			}
			if total > tt.target || total < tt.target-1000 || len(got) < tt.wantMin {
				t.Errorf("total %d over %d pods, want at most %d and within one GPU of it", total, len(got), tt.target)
			}
		})
	}
}
