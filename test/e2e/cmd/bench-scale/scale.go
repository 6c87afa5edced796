package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// namespace holds the benchmark's pods.
const namespace = "scale"

// podUnits is each running pod's gpu-mem, in GiB.
const podUnits = 4

// scale fills one cluster and measures the extender on it.
type scale struct {
	o      options
	c      *framework.Cluster
	client kubernetes.Interface // faster than the cluster's own client, for filling
	nodes  []string
}

func newScale(c *framework.Cluster, o options) (*scale, error) {
	rc := c.RestConfigWithLimits(2000, 4000)
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &scale{o: o, c: c, client: client}, nil
}

// measure fills the cluster, starts the extender and times it.
func (s *scale) measure(ctx context.Context, extenderBin string) (*report, error) {
	if err := s.fill(ctx); err != nil {
		return nil, err
	}
	rep := &report{Nodes: s.o.nodes, Pods: s.o.pods}
	args, profileAddr, err := benchrun.ExtenderArgs(s.o.ExtenderArgs, s.o.profile != "")
	if err != nil {
		return nil, err
	}
	ext, err := s.startExtender(ctx, extenderBin, args, rep)
	if err != nil {
		return nil, err
	}
	if err := s.checkHeld(ctx, ext, profileAddr); err != nil {
		return nil, err
	}
	if err := s.timeVerbs(ctx, ext, profileAddr, rep); err != nil {
		return nil, err
	}
	s.heapProfile(ctx, profileAddr, "after-calls")
	pid := ext.Proc.PID()
	if rep.RSSAfterMiB, err = rssMiB(pid, "VmRSS"); err != nil {
		return nil, err
	}
	if err := s.operate(ctx, ext); err != nil {
		return nil, err
	}
	if rep.RSSPeakMiB, err = rssMiB(pid, "VmHWM"); err != nil {
		return nil, err
	}
	return rep, nil
}

// fill creates the nodes, then the running pods, and logs how long each took.
func (s *scale) fill(ctx context.Context) error {
	start := time.Now()
	if err := s.addNodes(ctx); err != nil {
		return err
	}
	logf("%d nodes in %.1f s", s.o.nodes, time.Since(start).Seconds())
	start = time.Now()
	if err := s.addPods(ctx); err != nil {
		return err
	}
	logf("%d running pods in %.1f s", s.o.pods, time.Since(start).Seconds())
	return nil
}

// startExtender starts the extender with args and waits until it is ready; rep gets the time
// that took and its resident memory then.
func (s *scale) startExtender(ctx context.Context, bin string, args []string, rep *report) (*framework.Extender, error) {
	start := time.Now()
	ext, err := s.c.StartExtender(ctx, bin, 0, args...)
	if err != nil {
		return nil, err
	}
	if err := framework.WaitFor(ctx, 20*time.Millisecond, "extender ready", func() (bool, error) {
		var ready map[string]string
		return ext.GetJSON(ctx, "/readyz", &ready) == nil, nil
	}); err != nil {
		return nil, err
	}
	rep.ReadyS = time.Since(start).Seconds()
	if rep.RSSReadyMiB, err = rssMiB(ext.Proc.PID(), "VmRSS"); err != nil {
		return nil, err
	}
	return ext, nil
}

// checkHeld checks that the ready extender's cache (its inspect answer) holds every node and
// every running pod, after taking the "ready" heap profile.
func (s *scale) checkHeld(ctx context.Context, ext *framework.Extender, profileAddr string) error {
	var inv struct {
		Nodes []struct {
			Pods []json.RawMessage `json:"pods"`
		} `json:"nodes"`
	}
	if err := ext.GetJSON(ctx, framework.ExtenderPrefix+"/inspect", &inv); err != nil {
		return err
	}
	s.heapProfile(ctx, profileAddr, "ready")
	pods := 0
	for _, n := range inv.Nodes {
		pods += len(n.Pods)
	}
	if len(inv.Nodes) != s.o.nodes || pods != s.o.pods {
		return fmt.Errorf("ready extender holds %d nodes and %d pods, want %d and %d", len(inv.Nodes), pods, s.o.nodes, s.o.pods)
	}
	return nil
}

// timeVerbs times filter (then takes a CPU profile of it), then prioritize, with 500 candidate
// nodes when there are more, and with every node.
func (s *scale) timeVerbs(ctx context.Context, ext *framework.Extender, profileAddr string, rep *report) error {
	counts := []int{s.o.nodes}
	if s.o.nodes > 500 {
		counts = []int{500, s.o.nodes}
	}
	for _, candidates := range counts {
		l, err := s.filterLatency(ctx, ext, candidates)
		if err != nil {
			return err
		}
		rep.Filter = append(rep.Filter, l)
		s.cpuProfile(ctx, ext, profileAddr, candidates)
	}
	for _, candidates := range counts {
		l, err := s.prioritizeLatency(ctx, ext, candidates)
		if err != nil {
			return err
		}
		rep.Prioritize = append(rep.Prioritize, l)
	}
	return nil
}

// operate does what an operator does on a cluster this size, which weighs on the peak memory
// too: a /metrics scrape (every card's series) and the invariant check (the extender's audit,
// which lists every pod, and its inspect answer).
func (s *scale) operate(ctx context.Context, ext *framework.Extender) error {
	if _, err := ext.Metrics(ctx); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	inv, err := s.c.CheckInvariants(ctx, namespace, ext)
	if err != nil {
		return err
	}
	if !inv.OK() {
		return fmt.Errorf("invariant check failed: %s", inv)
	}
	return nil
}

// heapProfile writes the extender's heap profile to o.profile/heap-<when>.pprof when profiling.
func (s *scale) heapProfile(ctx context.Context, addr, when string) {
	if addr == "" {
		return
	}
	path := filepath.Join(s.o.profile, "heap-"+when+".pprof")
	if err := framework.SaveProfile(ctx, "http://"+addr+"/debug/pprof/heap?gc=1", path); err != nil {
		logf("heap profile: %v", err)
		return
	}
	logf("heap profile of the extender: %s", path)
}

// cpuProfile writes a 5 s CPU profile of the extender answering filter calls with candidates
// names (untimed, after the timed ones) to o.profile/cpu-<candidates>.pprof when profiling.
func (s *scale) cpuProfile(ctx context.Context, ext *framework.Extender, addr string, candidates int) {
	if addr == "" {
		return
	}
	path := filepath.Join(s.o.profile, fmt.Sprintf("cpu-%d.pprof", candidates))
	done := make(chan error, 1)
	go func() { done <- framework.SaveProfile(ctx, "http://"+addr+"/debug/pprof/profile?seconds=5", path) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				logf("CPU profile: %v", err)
				return
			}
			logf("CPU profile of the extender, filter with %d candidates: %s", candidates, path)
			return
		default:
		}
		if _, err := s.filterLatency(ctx, ext, candidates); err != nil {
			logf("CPU profile: %v", err)
			return
		}
	}
}

// addNodes creates the nodes, 32 at a time.
func (s *scale) addNodes(ctx context.Context) error {
	s.nodes = make([]string, s.o.nodes)
	for i := range s.nodes {
		s.nodes[i] = fmt.Sprintf("node-%05d", i)
	}
	return benchrun.AddGPUNodes(ctx, s.c, s.nodes, 8, 16, 32)
}

// addPods creates the running pods, already bound: pod i runs on node i mod NODES, on card
// (i / NODES) mod 8, with the placement annotations the extender would have written.
func (s *scale) addPods(ctx context.Context) error {
	names := contract.DefaultNames()
	q := *resource.NewQuantity(podUnits, resource.DecimalSI)
	return benchrun.Parallel(s.o.pods, 32, func(i int) error {
		node, card := s.nodes[i%len(s.nodes)], (i/len(s.nodes))%8
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("run-%06d", i), Namespace: namespace, Annotations: map[string]string{
				contract.AnnotationAllocation: fmt.Sprintf(`{"0":{"%d":%d}}`, card, podUnits),
				contract.AnnotationIndex:      fmt.Sprint(card),
				contract.AnnotationAssigned:   "true",
			}},
			Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "main", Image: benchrun.PauseImage,
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{names.Resource: q}}}}},
		}
		_, err := s.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
}

func rssMiB(pid int, field string) (float64, error) {
	kib, err := framework.MemoryKiB(pid, field)
	return float64(kib) / 1024, err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
