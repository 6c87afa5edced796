package cache

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/placement"
)

// TestGPUPosition: a card is found by its NVML index whether the node lists its cards 0, 1,
// 2, ... or with gaps, and an index the node lacks is not found.
func TestGPUPosition(t *testing.T) {
	cards := func(indexes ...int) []placement.GPUInfo {
		out := make([]placement.GPUInfo, len(indexes))
		for i, g := range indexes {
			out[i].Index = g
		}
		return out
	}
	tests := []struct {
		name   string
		gpus   []placement.GPUInfo
		index  int
		want   int
		wantOK bool
	}{
		{name: "in order", gpus: cards(0, 1, 2, 3), index: 2, want: 2, wantOK: true},
		{name: "with a gap", gpus: cards(1, 3), index: 3, want: 1, wantOK: true},
		{name: "position taken by another index", gpus: cards(1, 3), index: 1, want: 0, wantOK: true},
		{name: "missing", gpus: cards(1, 3), index: 2, want: -1},
		{name: "beyond the cards", gpus: cards(0, 1), index: 7, want: -1},
		{name: "negative", gpus: cards(0, 1), index: -1, want: -1},
		{name: "no cards", index: 0, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := gpuPosition(tt.gpus, tt.index); got != tt.want || ok != tt.wantOK {
				t.Errorf("gpuPosition(%d) = %d, %v; want %d, %v", tt.index, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
