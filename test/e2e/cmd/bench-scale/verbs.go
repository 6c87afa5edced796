package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// The timed calls: kube-scheduler's filter and prioritize, with real JSON bodies over mutual TLS.

// filterLatency times o.calls filter calls of pending pods of 24 shapes (one per call, in
// turn) with candidates node names chosen at random, as kube-scheduler sends them.
func (s *scale) filterLatency(ctx context.Context, ext *framework.Extender, candidates int) (latency, error) {
	return s.verbLatency(ctx, ext, "/filter", pendingShapes(), candidates, func(pod *v1.Pod, body []byte) error {
		var res extenderv1.ExtenderFilterResult
		if err := json.Unmarshal(body, &res); err != nil {
			return err
		}
		if res.Error != "" || res.NodeNames == nil {
			return fmt.Errorf("filter of %s: %+v", pod.Name, res)
		}
		return nil
	})
}

// prioritizeLatency times o.calls prioritize calls of pending pods without gpu-mem, of 8
// shapes, with candidates node names chosen at random.
func (s *scale) prioritizeLatency(ctx context.Context, ext *framework.Extender, candidates int) (latency, error) {
	return s.verbLatency(ctx, ext, "/prioritize", plainShapes(), candidates, func(pod *v1.Pod, body []byte) error {
		var res extenderv1.HostPriorityList
		if err := json.Unmarshal(body, &res); err != nil {
			return err
		}
		if len(res) != candidates {
			return fmt.Errorf("prioritize of %s: %d scores for %d candidates", pod.Name, len(res), candidates)
		}
		return nil
	})
}

// verbLatency times o.calls calls of verb, for the shapes in turn, with candidates node names
// chosen at random, as kube-scheduler sends them; check reads each answer.
func (s *scale) verbLatency(ctx context.Context, ext *framework.Extender, verb string, shapes []*v1.Pod, candidates int,
	check func(pod *v1.Pod, answer []byte) error) (latency, error) {
	rng := rand.New(rand.NewPCG(uint64(candidates), 7)) //nolint:gosec // G115: a positive count
	bodies := make([][]byte, len(shapes))
	for i, pod := range shapes {
		names := make([]string, candidates)
		for j, k := range rng.Perm(len(s.nodes))[:candidates] {
			names[j] = s.nodes[k]
		}
		raw, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
		if err != nil {
			return latency{}, err
		}
		bodies[i] = raw
	}
	times := make([]time.Duration, 0, s.o.calls)
	calls := make([]slowCall, 0, s.o.calls)
	for i := range s.o.calls {
		start := time.Now()
		var answer json.RawMessage
		if err := post(ctx, ext, verb, bodies[i%len(bodies)], &answer); err != nil {
			return latency{}, err
		}
		took := time.Since(start)
		times = append(times, took)
		calls = append(calls, slowCall{call: i, pod: shapes[i%len(shapes)].Name, took: took, bytes: len(answer)})
		if err := check(shapes[i%len(shapes)], answer); err != nil {
			return latency{}, err
		}
	}
	slices.SortStableFunc(calls, func(a, b slowCall) int { return cmp.Compare(b.took, a.took) })
	for _, c := range calls[:min(3, len(calls))] {
		logf("%s, %d candidates: call %d (%s) took %.2f ms, answer %d bytes", verb, candidates, c.call, c.pod, ms(c.took), c.bytes)
	}
	return latency{Candidates: candidates, P50Ms: ms(framework.Percentile(times, 0.5)), P99Ms: ms(framework.Percentile(times, 0.99))}, nil
}

// slowCall is one timed call, for the log of the slowest.
type slowCall struct {
	call  int
	pod   string
	took  time.Duration
	bytes int
}

// plainShapes are 8 pods without gpu-mem: 1-16 CPUs, 2-64 GiB of memory.
func plainShapes() []*v1.Pod {
	var out []*v1.Pod
	for _, cpu := range []int64{1, 2, 4, 16} {
		for _, gib := range []int64{2, 4 * cpu} {
			name := fmt.Sprintf("plain-%dcpu-%dgib", cpu, gib)
			out = append(out, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name)},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: benchrun.PauseImage,
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
						v1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
						v1.ResourceMemory: *resource.NewQuantity(gib<<30, resource.BinarySI)}}}}}})
		}
	}
	return out
}

// pendingShapes are 24 pods: 1-12 GiB on one card, and 2, 4 or 8 cards of 8-16 GiB.
func pendingShapes() []*v1.Pod {
	names := contract.DefaultNames()
	pod := func(name string, units int64, annotations map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name), Annotations: annotations},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: benchrun.PauseImage,
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{names.Resource: *resource.NewQuantity(units, resource.DecimalSI)}}}}}}
	}
	var out []*v1.Pod
	for u := int64(1); u <= 12; u++ {
		out = append(out, pod(fmt.Sprintf("one-%d", u), u, nil))
	}
	for _, gpus := range []int64{2, 4, 8} {
		for _, per := range []int64{8, 10, 12, 16} {
			out = append(out, pod(fmt.Sprintf("multi-%d-%d", gpus, per), gpus*per,
				map[string]string{contract.DefaultGPUsPerContainer: fmt.Sprint(gpus)}))
		}
	}
	return out
}

// post sends body to the extender's verb and decodes its answer into v.
func post(ctx context.Context, ext *framework.Extender, verb string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ext.URL()+framework.ExtenderPrefix+verb, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ext.Client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", verb, resp.StatusCode, raw)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
