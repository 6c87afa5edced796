package placement_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// TestCardFits: the one fit test of a card, on a summarised snapshot and on a hand-built one,
// and CheckFit's reason when a placement's card fails it.
func TestCardFits(t *testing.T) {
	gpus := []placement.GPUInfo{
		{Index: 0, Model: "NVIDIA A100-SXM4-40GB", Capacity: 40, Used: 10, Healthy: true},
		{Index: 1, Model: "Tesla T4", Capacity: 16, Used: 0, Healthy: true},
		{Index: 2, Model: "Tesla T4", Capacity: 16, Used: 0, Healthy: false},
	}
	anyModel := &gpumem.PodRequest{Containers: []gpumem.ContainerRequest{{Key: "0", Units: 1, GPUs: 1}}}
	a100 := &gpumem.PodRequest{Containers: anyModel.Containers, Models: []string{"A100"}}
	tests := []struct {
		name   string
		g      int
		units  int64
		req    *gpumem.PodRequest
		want   bool
		reason string // CheckFit's, when it does not fit
	}{
		{"exactly the free units", 0, 30, anyModel, true, ""},
		{"one more than free", 0, 31, anyModel, false, "has 30 units free, the pod needs 31"},
		{"accepted model", 0, 4, a100, true, ""},
		{"other model", 1, 4, a100, false, `is a "Tesla T4", the pod accepts [A100]`},
		{"other model, nothing asked", 1, 0, a100, false, ""},
		{"unhealthy", 2, 1, anyModel, false, "is unhealthy"},
		{"unhealthy, nothing asked", 2, 0, anyModel, false, ""},
		{"healthy, nothing asked", 1, 0, anyModel, true, ""},
	}
	summarised := &placement.NodeInfo{Name: "n"}
	summarised.SetGPUs(gpus)
	summarised.Summarize()
	byHand := &placement.NodeInfo{Name: "n", GPUs: gpus}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []*placement.NodeInfo{summarised, byHand} {
				if got := n.CardFits(tt.g, tt.units, tt.req); got != tt.want {
					t.Errorf("CardFits(%d, %d) = %v, want %v", tt.g, tt.units, got, tt.want)
				}
			}
			if tt.units == 0 {
				return
			}
			req := &gpumem.PodRequest{Containers: []gpumem.ContainerRequest{{Key: "0", Units: tt.units, GPUs: 1}}, Models: tt.req.Models}
			err := summarised.CheckFit(req, gpumem.Allocation{"0": {gpus[tt.g].Index: tt.units}})
			switch {
			case tt.want && err != nil:
				t.Errorf("CheckFit = %v, want nil", err)
			case !tt.want && (!errors.Is(err, placement.ErrDoesNotFit) || !strings.Contains(err.Error(), tt.reason)):
				t.Errorf("CheckFit = %v, want ErrDoesNotFit saying %q", err, tt.reason)
			}
		})
	}
}

// TestCompareKeys: pods order as their namespace/name keys compare, namespaces that are
// prefixes of each other and bytes on either side of "/" included.
func TestCompareKeys(t *testing.T) {
	namespaces := []string{"", "a", "a-b", "a.b", "a0", "ab", "a/", "a/b", "b", "default", "default-x", "default.a"}
	podNames := []string{"", "a", "b", "a-b", "b/c", "z"}
	var pods []placement.PodInfo
	for _, ns := range namespaces {
		for _, n := range podNames {
			pods = append(pods, placement.PodInfo{Namespace: ns, Name: n})
		}
	}
	for i := range pods {
		for j := range pods {
			a, b := &pods[i], &pods[j]
			if got, want := placement.CompareKeys(a, b), strings.Compare(a.Key(), b.Key()); got != want {
				t.Errorf("CompareKeys(%q, %q) = %d, want %d", a.Key(), b.Key(), got, want)
			}
		}
	}
}
