package usage

import (
	"context"
	"fmt"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// shareList is a ShareSource that returns its entries for the pods it is given.
type shareList []ContainerLimit

func (l shareList) ContainerShares(pods []*v1.Pod) []ContainerLimit {
	var out []ContainerLimit
	for _, p := range pods {
		for _, s := range l {
			if s.PodUID == p.UID {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestSamplerWithShares: on a DRA node the pods ask no gpu-mem; what each container asked and
// its limits are its shares (the claims prepared for it). The metrics show them; a container
// over its share on a card plus the allowance is policed like device-plugin mode's (b: 3 GiB on
// a card of its 2 GiB there), one within it is not (a: 4.5 GiB of 4 GiB); a node that does not
// enforce lists no limits but knows the asks, and warns about a container over its total ask.
func TestSamplerWithShares(t *testing.T) {
	a, b := gpuPod("a", "cid-a", 0), gpuPod("b", "cid-b", 0) // converted pods: no gpu-mem in their limits
	shares := shareList{
		{Namespace: "team", Pod: "a", Container: "main", PodUID: a.UID, UUID: uuid0, Bytes: 4 * gib},
		{Namespace: "team", Pod: "b", Container: "main", PodUID: b.UID, UUID: uuid0, Bytes: 2 * gib},
		{Namespace: "team", Pod: "b", Container: "main", PodUID: b.UID, UUID: uuid1, Bytes: 2 * gib},
	}
	tests := []struct {
		name       string
		mode       string
		wantLimits string
		wantKills  []string
		wantEvents []string
	}{
		{
			name: "enforcing: limits listed, the container over its share killed", mode: contract.MemoryLimitHAMiCore,
			wantLimits: fmt.Sprintf(`
# HELP gpushare_container_gpu_memory_limit_bytes GPU memory the container may use on the card, enforced by HAMi-core (absent where the node enforces no limit).
# TYPE gpushare_container_gpu_memory_limit_bytes gauge
gpushare_container_gpu_memory_limit_bytes{container="main",gpu_uuid="%[1]s",namespace="team",pod="a"} %[3]d
gpushare_container_gpu_memory_limit_bytes{container="main",gpu_uuid="%[1]s",namespace="team",pod="b"} %[4]d
gpushare_container_gpu_memory_limit_bytes{container="main",gpu_uuid="%[2]s",namespace="team",pod="b"} %[4]d
`, uuid0, uuid1, 4*gib, 2*gib),
			wantKills: []string{"20 uid-b/cid-b"},
			wantEvents: []string{"b GPUMemoryLimitEscaped: container main escaped its GPU memory limit: it uses 3072 MiB on GPU 0 (" + uuid0 +
				"), more than its limit of 2048 MiB plus 512 MiB of CUDA context allowance (512 MiB for each of its 1 process); action: killed process 20 (SIGKILL); the container restarts as its restartPolicy says"},
		},
		{
			name: "not enforcing: no limits, the container over its ask warned", mode: contract.MemoryLimitNone,
			wantEvents: []string{"a GPUMemoryOverRequest: container main uses 4608Mi of GPU memory on " + uuid0 + ", more than the 4Gi it asked (4 of aliyun.com/gpu-mem)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			k := &killLog{}
			f.policed(EscapeActionKill, k, probe{})
			f.s.cfg.MemoryLimit, f.s.cfg.MemoryLimitConfigured = tt.mode, tt.mode
			f.s.cfg.Shares = shares
			f.pods.set(a, b)
			f.owners[10] = Owner{PodUID: "uid-a", ContainerID: "cid-a"}
			f.owners[20] = Owner{PodUID: "uid-b", ContainerID: "cid-b"}
			f.host.SetUsage(0, 50, []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 4*gib + 512*mib}, {Pid: 20, UsedGpuMemory: 3 * gib}})
			if _, err := f.s.Sample(context.Background()); err != nil {
				t.Fatal(err)
			}
			requested := fmt.Sprintf(`
# HELP gpushare_container_gpu_memory_requested_bytes GPU memory the container asked (its gpu-mem units; on a DRA node, the memory of its claims); 0 for a container using a GPU without asking.
# TYPE gpushare_container_gpu_memory_requested_bytes gauge
gpushare_container_gpu_memory_requested_bytes{container="main",namespace="team",pod="a"} %d
gpushare_container_gpu_memory_requested_bytes{container="main",namespace="team",pod="b"} %d
`, 4*gib, 4*gib)
			if err := testutil.CollectAndCompare(f.s, strings.NewReader(requested+tt.wantLimits), "gpushare_container_gpu_memory_requested_bytes",
				"gpushare_container_gpu_memory_limit_bytes"); err != nil {
				t.Error(err)
			}
			if diff := cmp.Diff(tt.wantKills, k.list()); diff != "" {
				t.Errorf("kills (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEvents, f.events.list()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}
