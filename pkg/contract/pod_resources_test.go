package contract

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodCPUMemory(t *testing.T) {
	res := func(cpu, mem string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}}
	}
	tests := []struct {
		name string
		spec v1.PodSpec
		want [2]int64
	}{
		{"sum of app containers", v1.PodSpec{Containers: []v1.Container{{Resources: res("1", "1Gi")}, {Resources: res("500m", "1Gi")}}}, [2]int64{1500, 2 << 30}},
		{"init container larger", v1.PodSpec{InitContainers: []v1.Container{{Resources: res("4", "1Mi")}},
			Containers: []v1.Container{{Resources: res("1", "1Gi")}}}, [2]int64{4000, 1 << 30}},
		{"no requests", v1.PodSpec{Containers: []v1.Container{{}}}, [2]int64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cpu, mem := PodCPUMemory(&v1.Pod{Spec: tt.spec})
			if diff := cmp.Diff(tt.want, [2]int64{cpu, mem}); diff != "" {
				t.Errorf("PodCPUMemory (-want,+got):\n%s", diff)
			}
		})
	}
}
