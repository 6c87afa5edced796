package contract_test

import (
	"errors"
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
