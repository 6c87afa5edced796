package contract_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

func TestAllocationPerGPU(t *testing.T) {
	tests := []struct {
		name  string
		alloc contract.Allocation
		want  map[int]int64
	}{
		{name: "apps add up", alloc: contract.Allocation{"0": {0: 2}, "1": {0: 3, 1: 1}}, want: map[int]int64{0: 5, 1: 1}},
		{name: "init overlaps apps", alloc: contract.Allocation{"init-0": {0: 4}, "0": {0: 2}, "1": {1: 1}}, want: map[int]int64{0: 4, 1: 1}},
		{name: "init smaller than apps", alloc: contract.Allocation{"init-0": {0: 1}, "0": {0: 2}}, want: map[int]int64{0: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.alloc.PerGPU()); diff != "" {
				t.Errorf("PerGPU() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestAnnotationsRoundTrip(t *testing.T) {
	names := contract.DefaultNames()
	pod := st.MakePod().GPUMem(4).GPUMem(2).Obj()
	req, err := contract.ParseRequest(pod, &names)
	if err != nil {
		t.Fatal(err)
	}
	alloc := contract.Allocation{"0": {1: 4}, "1": {0: 2}}
	ann, err := contract.PlacementAnnotations(alloc, &req, map[int]int64{0: 16, 1: 32}, time.Unix(0, 42))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		contract.AnnotationIndex: "0", contract.AnnotationPod: "6", contract.AnnotationDev: "16",
		contract.AnnotationAssigned: "false", contract.AnnotationAssumeTime: "42",
		contract.AnnotationAllocation: `{"0":{"1":4},"1":{"0":2}}`,
	}
	if diff := cmp.Diff(want, ann); diff != "" {
		t.Errorf("Annotations() (-want,+got):\n%s", diff)
	}
	pod.Annotations = ann
	got, ok, err := contract.AllocationFromPod(pod, &req)
	if err != nil || !ok {
		t.Fatalf("AllocationFromPod() = %v, %v", ok, err)
	}
	if diff := cmp.Diff(alloc, got); diff != "" {
		t.Errorf("AllocationFromPod() (-want,+got):\n%s", diff)
	}
	if !got.Matches(&req) {
		t.Errorf("Matches() = false for the pod's own placement")
	}
}

func TestAllocationFromPod(t *testing.T) {
	names := contract.DefaultNames()
	tests := []struct {
		name    string
		ann     map[string]string
		want    contract.Allocation
		wantOK  bool
		wantErr error
	}{
		{name: "none", ann: map[string]string{}},
		{name: "legacy index", ann: map[string]string{contract.AnnotationIndex: "1"}, want: contract.Allocation{"0": {1: 4}}, wantOK: true},
		{name: "garbage index", ann: map[string]string{contract.AnnotationIndex: "x"}, wantErr: contract.ErrInvalidAllocation},
		{name: "garbage json", ann: map[string]string{contract.AnnotationAllocation: "{"}, wantErr: contract.ErrInvalidAllocation},
		{name: "negative units", ann: map[string]string{contract.AnnotationAllocation: `{"0":{"0":-4}}`}, wantErr: contract.ErrInvalidAllocation},
		{name: "empty", ann: map[string]string{contract.AnnotationAllocation: `{}`}, wantErr: contract.ErrInvalidAllocation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := st.MakePod().GPUMem(4).Obj()
			pod.Annotations = tt.ann
			req, _ := contract.ParseRequest(pod, &names)
			got, ok, err := contract.AllocationFromPod(pod, &req)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); tt.wantErr == nil && diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestCheckPlacement(t *testing.T) {
	one := contract.ContainerRequest{Key: "0", Name: "c", Units: 1, GPUs: 1}
	two := contract.ContainerRequest{Key: "0", Name: "c", Units: 8, GPUs: 2}
	tests := []struct {
		name      string
		c         contract.ContainerRequest
		placement map[int]int64
		// wantErr lists what the error must say ("" for none): the container, its ask and the placement
		wantErr []string
	}{
		{name: "one card, its ask", c: one, placement: map[int]int64{3: 1}},
		{name: "two cards, half on each", c: two, placement: map[int]int64{0: 4, 5: 4}},
		{name: "forged: one unit asked, two whole cards placed", c: one, placement: map[int]int64{0: 16, 1: 16},
			wantErr: []string{`container "c"`, "asks 1 units over 1 GPU(s)", `{"0":16,"1":16}`, "32 units over 2 GPU(s)"}},
		{name: "more units on the right card count", c: one, placement: map[int]int64{0: 2},
			wantErr: []string{`container "c"`, "asks 1 units", `{"0":2}`}},
		{name: "fewer units", c: two, placement: map[int]int64{0: 2, 1: 2}, wantErr: []string{"asks 8 units over 2 GPU(s), 4 on each", `{"0":2,"1":2}`}},
		{name: "right total on one card instead of two", c: two, placement: map[int]int64{0: 8}, wantErr: []string{"8 units over 1 GPU(s)"}},
		{name: "right total on three cards", c: contract.ContainerRequest{Key: "0", Name: "c", Units: 6, GPUs: 2},
			placement: map[int]int64{0: 2, 1: 2, 2: 2}, wantErr: []string{"6 units over 3 GPU(s)"}},
		{name: "right total and count, uneven split", c: two, placement: map[int]int64{0: 5, 1: 3}, wantErr: []string{`{"0":5,"1":3}`}},
		{name: "no placement", c: one, wantErr: []string{`container "c"`, "{}", "0 units over 0 GPU(s)"}},
		{name: "a request without cards", c: contract.ContainerRequest{Key: "0", Name: "c", Units: 1}, placement: map[int]int64{0: 1},
			wantErr: []string{"over 0 GPU(s), 0 on each"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := contract.CheckPlacement(tt.c, tt.placement)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("CheckPlacement() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, contract.ErrInvalidAllocation) {
				t.Fatalf("CheckPlacement() = %v, want ErrInvalidAllocation", err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("CheckPlacement() = %q, want it to say %q", err, s)
				}
			}
		})
	}
}

func TestCheckAllocation(t *testing.T) {
	names := contract.DefaultNames()
	tests := []struct {
		name    string
		pod     *st.PodWrapper
		alloc   contract.Allocation
		wantErr string // "" for none
	}{
		{name: "one container", pod: st.MakePod().GPUMem(4), alloc: contract.Allocation{"0": {1: 4}}},
		{name: "init and app containers on one card", pod: st.MakePod().InitGPUMem(6).GPUMem(2).Container().GPUMem(3),
			alloc: contract.Allocation{"init-0": {0: 6}, "0": {0: 2}, "2": {1: 3}}},
		{name: "gang of two-card containers", pod: st.MakePod().GPUMem(8).GPUMem(4).Annotation(contract.DefaultGPUsPerContainer, "2"),
			alloc: contract.Allocation{"0": {0: 4, 1: 4}, "1": {2: 2, 3: 2}}},
		{name: "the second container forged", pod: st.MakePod().NamedGPUMem("a", 2).NamedGPUMem("b", 1),
			alloc: contract.Allocation{"0": {0: 2}, "1": {0: 16, 1: 16}}, wantErr: `container "b"`},
		{name: "a container left out", pod: st.MakePod().NamedGPUMem("a", 2).NamedGPUMem("b", 1),
			alloc: contract.Allocation{"0": {0: 2}}, wantErr: `container "b"`},
		{name: "a container that asks nothing placed", pod: st.MakePod().GPUMem(2).Container(),
			alloc: contract.Allocation{"0": {0: 2}, "1": {1: 16}}, wantErr: `["1"]`},
		{name: "legacy index of a one-card pod", pod: st.MakePod().GPUMem(4).Annotation(contract.AnnotationIndex, "1")},
		{name: "legacy index cannot place a two-card pod", pod: st.MakePod().GPUMem(4).Annotation(contract.DefaultGPUsPerContainer, "2").
			Annotation(contract.AnnotationIndex, "1"), wantErr: "4 units over 1 GPU(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.alloc != nil {
				tt.pod.Allocation(tt.alloc)
			}
			pod := tt.pod.Obj()
			req, err := contract.ParseRequest(pod, &names)
			if err != nil {
				t.Fatal(err)
			}
			alloc, ok, err := contract.AllocationFromPod(pod, &req)
			if err != nil || !ok {
				t.Fatalf("AllocationFromPod() = %v, %v", ok, err)
			}
			err = contract.CheckAllocation(alloc, &req)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CheckAllocation() = %v, want nil", err)
			case tt.wantErr != "" && (!errors.Is(err, contract.ErrInvalidAllocation) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("CheckAllocation() = %v, want ErrInvalidAllocation saying %q", err, tt.wantErr)
			}
			if err == nil && !alloc.Matches(&req) {
				t.Errorf("CheckAllocation() accepts a placement Matches() refuses")
			}
		})
	}
}
