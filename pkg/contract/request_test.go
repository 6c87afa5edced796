package contract_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

// models is n '|'-separated model names of size bytes each.
func models(n, size int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%0*d", size-1, i)
	}
	return strings.Join(out, "|")
}

func withLimit(p *v1.Pod, q string) *v1.Pod {
	p.Spec.Containers[0].Resources.Limits[contract.DefaultResourceName] = resource.MustParse(q)
	return p
}

func TestParseRequest(t *testing.T) {
	names := contract.DefaultNames()
	tests := []struct {
		name    string
		pod     *v1.Pod
		want    contract.PodRequest
		wantErr bool
	}{
		{name: "no gpu-mem", pod: st.MakePod().Container().Obj(), want: contract.PodRequest{}},
		{name: "one container", pod: st.MakePod().GPUMem(4).Obj(),
			want: contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Name: "c0", Units: 4, GPUs: 1}}}},
		{name: "multi container skips non-gpu", pod: st.MakePod().GPUMem(4).Container().GPUMem(2).Obj(),
			want: contract.PodRequest{Containers: []contract.ContainerRequest{
				{Key: "0", Name: "c0", Units: 4, GPUs: 1}, {Key: "2", Name: "c2", Units: 2, GPUs: 1}}}},
		{name: "init containers first", pod: st.MakePod().InitGPUMem(6).GPUMem(2).Obj(),
			want: contract.PodRequest{Containers: []contract.ContainerRequest{
				{Key: "init-0", Name: "init0", Init: true, Units: 6, GPUs: 1}, {Key: "0", Name: "c0", Units: 2, GPUs: 1}}}},
		{name: "two gpus", pod: st.MakePod().GPUMem(16).Annotation(contract.DefaultGPUsPerContainer, "2").Obj(),
			want: contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Name: "c0", Units: 16, GPUs: 2}}}},
		{name: "models", pod: st.MakePod().GPUMem(1).Annotation(contract.DefaultModelKey, " A100 | H100 ").Obj(),
			want: contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Name: "c0", Units: 1, GPUs: 1}}, Models: []string{"A100", "H100"}}},
		{name: "uneven split", pod: st.MakePod().GPUMem(5).Annotation(contract.DefaultGPUsPerContainer, "2").Obj(), wantErr: true},
		{name: "garbage gpu count", pod: st.MakePod().GPUMem(5).Annotation(contract.DefaultGPUsPerContainer, "two").Obj(), wantErr: true},
		{name: "zero gpu count", pod: st.MakePod().GPUMem(5).Annotation(contract.DefaultGPUsPerContainer, "0").Obj(), wantErr: true},
		{name: "signed gpu count, which the admission policy refuses", pod: st.MakePod().GPUMem(4).Annotation(contract.DefaultGPUsPerContainer, "+2").Obj(), wantErr: true},
		{name: "gpu count with spaces", pod: st.MakePod().GPUMem(4).Annotation(contract.DefaultGPUsPerContainer, " 2 ").Obj(),
			want: contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Name: "c0", Units: 4, GPUs: 2}}}},
		{name: "signed core percent", pod: st.MakePod().GPUMem(4).Annotation(contract.DefaultCoreKey, "+30").Obj(), wantErr: true},
		{name: "empty model list", pod: st.MakePod().GPUMem(5).Annotation(contract.DefaultModelKey, "|").Obj(), wantErr: true},
		{name: "32 models of 64 bytes", pod: st.MakePod().GPUMem(1).Annotation(contract.DefaultModelKey, models(32, 64)).Obj(),
			want: contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Name: "c0", Units: 1, GPUs: 1}}, Models: strings.Split(models(32, 64), "|")}},
		{name: "33 models", pod: st.MakePod().GPUMem(1).Annotation(contract.DefaultModelKey, models(33, 4)).Obj(), wantErr: true},
		{name: "a 65-byte model", pod: st.MakePod().GPUMem(1).Annotation(contract.DefaultModelKey, models(1, 65)).Obj(), wantErr: true},
		{name: "a 130 KB model list", pod: st.MakePod().GPUMem(1).Annotation(contract.DefaultModelKey, models(20000, 6)).Obj(), wantErr: true},
		{name: "negative", pod: withLimit(st.MakePod().GPUMem(1).Obj(), "-2"), wantErr: true},
		{name: "fractional", pod: withLimit(st.MakePod().GPUMem(1).Obj(), "500m"), wantErr: true},
		{name: "10G is not 10 GiB", pod: withLimit(st.MakePod().GPUMem(1).Obj(), "10G"), wantErr: true},
		{name: "10Gi is absurd too", pod: withLimit(st.MakePod().GPUMem(1).Obj(), "10Gi"), wantErr: true},
		{name: "requests differ from limits", pod: func() *v1.Pod {
			p := st.MakePod().GPUMem(4).Obj()
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{contract.DefaultResourceName: resource.MustParse("2")}
			return p
		}(), wantErr: true},
		{name: "requests without limits", pod: func() *v1.Pod {
			p := st.MakePod().GPUMem(4).Obj()
			p.Spec.Containers[0].Resources.Requests, p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Limits, nil
			return p
		}(), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := contract.ParseRequest(tt.pod, &names)
			if tt.wantErr {
				if !errors.Is(err, contract.ErrInvalidRequest) {
					t.Fatalf("ParseRequest() error = %v, want ErrInvalidRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRequest() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(contract.PodRequest{}, "ModelTokens")); diff != "" {
				t.Errorf("ParseRequest() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTotalUnits(t *testing.T) {
	names := contract.DefaultNames()
	tests := []struct {
		name string
		pod  *v1.Pod
		want int64
	}{
		{name: "apps sum", pod: st.MakePod().GPUMem(2).GPUMem(3).Obj(), want: 5},
		{name: "init larger", pod: st.MakePod().InitGPUMem(8).GPUMem(2).GPUMem(3).Obj(), want: 8},
		{name: "init smaller", pod: st.MakePod().InitGPUMem(1).GPUMem(2).Obj(), want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := contract.ParseRequest(tt.pod, &names)
			if err != nil {
				t.Fatal(err)
			}
			if got := req.TotalUnits(); got != tt.want {
				t.Errorf("TotalUnits() = %d, want %d", got, tt.want)
			}
		})
	}
}
