package wire

import (
	"encoding/json"
	"fmt"
	"testing"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/gpumem"
)

// benchCandidates are the candidate counts of the codec's benchmarks: a filter call of a
// large cluster after kube-scheduler's sampling, and of a 5,000-node cluster in full.
var benchCandidates = []int{500, 5000}

func benchNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
	}
	return names
}

// BenchmarkDecodeArgs decodes a filter request of a 4-unit pod and n candidate names:
// codec=wire is DecodeArgs, codec=encoding-json what it replaces.
func BenchmarkDecodeArgs(b *testing.B) {
	pod := st.MakePod().Name("pending").GPUMem(4).CPU(500, 1<<30).Obj()
	for _, n := range benchCandidates {
		names := benchNames(n)
		body, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("codec=wire/candidates=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := DecodeArgs(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("codec=encoding-json/candidates=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				var args extenderArgs
				if err := Decode(body, &args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFilterAnswer encodes filter's answer for a pod that fits none of n candidates (every
// candidate named with its reason, the largest answer): codec=wire is AppendJSON,
// codec=encoding-json json.Marshal of Result().
func BenchmarkFilterAnswer(b *testing.B) {
	reasons := []*gpumem.FitError{
		{Summary: "GPU memory: no GPU has 100 GiB free"},
		{Summary: "GPU memory: all GPUs of the node are unhealthy", Unresolvable: true},
	}
	for _, n := range benchCandidates {
		names := benchNames(n)
		a := &FilterAnswer{Args: &extenderv1.ExtenderArgs{NodeNames: &names}, Names: names, Failures: make([]*gpumem.FitError, n)}
		for i := range a.Failures {
			a.Failures[i] = reasons[i%7/6]
		}
		b.Run(fmt.Sprintf("codec=wire/candidates=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := a.AppendJSON(nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("codec=encoding-json/candidates=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := json.Marshal(a.Result()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
