package contract

import (
	"errors"
	"strings"
	"testing"
)

func cardsWithLinks(rows ...string) []GPU {
	gpus := make([]GPU, len(rows))
	for i, r := range rows {
		gpus[i] = GPU{Index: i, Units: 16, Healthy: true, Links: r, TopologyVersion: TopologyVersion}
	}
	return gpus
}

func TestTopologyOf(t *testing.T) {
	tests := []struct {
		name    string
		gpus    []GPU
		wantErr bool
		wantNil bool
		// want is Link(0,1), Link(1,2) when there are three cards, else Link(0,1).
		want []Link
	}{
		{name: "no links: no topology", gpus: []GPU{{Index: 0}, {Index: 1}}, wantNil: true},
		{name: "NVLink pair and a PCIe card", gpus: cardsWithLinks("X NV4 SYS", "NV4 X PIX", "SYS PIX X"), want: []Link{NVLinkOf(4), LinkPIX}},
		{name: "unknown token reads as SYS", gpus: cardsWithLinks("X C2C", "C2C X"), want: []Link{LinkSYS}},
		{name: "absurd NVLink count reads as SYS", gpus: cardsWithLinks("X NV99999999999", "NV99999999999 X"), want: []Link{LinkSYS}},
		{name: "asymmetric", gpus: cardsWithLinks("X NV4", "PIX X"), wantErr: true},
		{name: "too few tokens", gpus: cardsWithLinks("X", "NV4 X"), wantErr: true},
		{name: "diagonal not X", gpus: cardsWithLinks("NV4 NV4", "NV4 X"), wantErr: true},
		{name: "X off the diagonal", gpus: cardsWithLinks("X X", "X X"), wantErr: true},
		{name: "one card without links", gpus: []GPU{{Index: 0, Links: "X NV1"}, {Index: 1}}, wantErr: true},
		{name: "newer grammar", gpus: func() []GPU { g := cardsWithLinks("X NV1", "NV1 X"); g[1].TopologyVersion = 2; return g }(), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top, err := TopologyOf(tt.gpus)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidTopology) {
					t.Fatalf("TopologyOf() = %v, want ErrInvalidTopology", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantNil {
				if top != nil {
					t.Fatalf("TopologyOf() = %+v, want nil", top)
				}
				return
			}
			if got := top.Link(0, 1); got != tt.want[0] {
				t.Errorf("Link(0,1) = %v, want %v", got, tt.want[0])
			}
			if len(tt.want) > 1 {
				if got := top.Link(1, 2); got != tt.want[1] {
					t.Errorf("Link(1,2) = %v, want %v", got, tt.want[1])
				}
			}
		})
	}
}

func TestLinkScoreAndTokens(t *testing.T) {
	order := []Link{LinkSYS, LinkNODE, LinkPHB, LinkPXB, LinkPIX, NVLinkOf(1), NVLinkOf(2), NVLinkOf(12)}
	wantScores := []int{10, 20, 30, 40, 50, 100, 200, 1200}
	for i, l := range order {
		if got := l.Score(); got != wantScores[i] {
			t.Errorf("%v.Score() = %d, want %d", l, got, wantScores[i])
		}
		if got := ParseLink(l.String()); got != l {
			t.Errorf("ParseLink(%q) = %v, want %v", l.String(), got, l)
		}
	}
	links := [][]Link{{0, NVLinkOf(2), LinkSYS}, {NVLinkOf(2), 0, LinkPHB}, {LinkSYS, LinkPHB, 0}}
	if got := EncodeLinks(links, 1); got != "NV2 X PHB" {
		t.Errorf("EncodeLinks(row 1) = %q", got)
	}
	top, err := TopologyOf(cardsWithLinks(EncodeLinks(links, 0), EncodeLinks(links, 1), EncodeLinks(links, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if got := top.SetScore([]int{0, 1, 2}); got != 200+10+30 {
		t.Errorf("SetScore(all) = %d, want 240", got)
	}
}

// TestDecodeGPUsBoundsTopology: a hostile inventory's links and NUMA nodes are refused, and a
// well-formed one round-trips; readers that predate the fields ignore them (plain JSON fields).
func TestDecodeGPUsBoundsTopology(t *testing.T) {
	numa := func(n int) *int { return &n }
	long := []GPU{{Index: 0, Units: 1, Links: "X " + strings.Repeat("NV1 ", 100)}}
	badNUMA := []GPU{{Index: 0, Units: 1, NUMA: numa(-2)}}
	ok := cardsWithLinks("X NV4", "NV4 X")
	ok[0].NUMA, ok[1].NUMA = numa(0), numa(1)
	for name, gpus := range map[string][]GPU{"links too long": long, "negative NUMA node": badNUMA} {
		raw, err := EncodeGPUs(gpus)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeGPUs(raw); !errors.Is(err, ErrInvalidInventory) {
			t.Errorf("%s: DecodeGPUs() = %v, want ErrInvalidInventory", name, err)
		}
	}
	raw, err := EncodeGPUs(ok)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeGPUs(raw)
	if err != nil {
		t.Fatal(err)
	}
	if *got[1].NUMA != 1 || got[0].Links != "X NV4" || got[1].TopologyVersion != TopologyVersion {
		t.Errorf("round trip lost the topology: %+v", got)
	}
}
