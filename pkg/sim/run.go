package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Run is one simulation: a trace, a policy and a seed.
type Run struct {
	// Nodes and Pods are the trace.
	Nodes []Node
	Pods  []Pod
	// Policy is the policy under test, freshly built (it may learn).
	Policy placement.Policy
	// Inflate is the target total GPU request as a multiple of capacity (1.3 in the paper).
	Inflate float64
	// Seed drives the shuffle, the inflation, the node tie order and randomised policies.
	Seed uint64
	// ExtenderTieOrder breaks ties between equally rated nodes as the extender does in
	// production (placement.TieOrder of the pod and node names) instead of in a seeded random
	// order.
	ExtenderTieOrder bool
	// SampleNodes limits each decision to the nodes kube-scheduler passes the extender: the
	// first feasible ones from a rotating start, PercentageOfNodesToScore of them (0 is
	// kube-scheduler's adaptive default; see sampler).
	SampleNodes              bool
	PercentageOfNodesToScore int
	// LearnAtBind teaches a learning policy each placed pod with gpu-mem after its placement,
	// as the extender does, instead of every pod at submission (the paper's protocol).
	LearnAtBind bool
	// SyncNodes hands a policy that keeps per-node state (placement.NodeSyncer) every node
	// before the first pod, as the extender's periodic policy sync does; otherwise it knows the
	// nodes it has scored.
	SyncNodes bool
	// HideLinks leaves the nodes' links (Node.Links) out of their annotations: placement does
	// not see them, and the result still measures the multi-card containers against them
	// (TopologySyntheticBlind).
	HideLinks bool
	// Priorities gives each pod the priority of its qos class (QoSPriority) and measures the
	// allocation of the pods above BE apart (Result.HighCurve).
	Priorities bool
	// Preemption lets a pod that fits no node preempt pods of lower priority, as the extender
	// does (preemption.go); it implies Priorities.
	Preemption bool
	// DRA, when set, places the pods as under Dynamic Resource Allocation: kube-scheduler's
	// allocator takes the cards, first-fit in the order the driver publishes, and the node is
	// chosen as the variant says (dra.go). Nil: the policy chooses node and cards.
	DRA *DRA
}

// ModelProduction sets every option that makes the run model what users get through
// kube-scheduler: the extender's ties, node sampling with percentage (0: adaptive), learning at
// bind, and the policy's node sync.
func (r *Run) ModelProduction(percentage int) {
	r.ExtenderTieOrder, r.SampleNodes, r.LearnAtBind, r.SyncNodes = true, true, true, true
	r.PercentageOfNodesToScore = percentage
}

// Result is what one Run measured.
type Result struct {
	// Curve is the allocation (% of GPU capacity) at each integer arrived % of capacity.
	Curve []float64
	// Submitted and Placed count pods.
	Submitted, Placed int
	// Decisions says, for each submitted pod in order, whether it was placed.
	Decisions []bool
	// Nodes are the placed pods' nodes, "" for a rejected pod, in submission order (Execute
	// only: ExecuteOn's submit does not tell).
	Nodes []string
	// CapacityMilli is the cluster's GPU capacity in milli-GPU.
	CapacityMilli int64
	// Seconds is the wall time of the run.
	Seconds float64
	// MultiCard counts the placed containers on two cards or more, but not all, of nodes with
	// links (Node.Links); OnBestSet those whose cards' SetScore (placement.Topology) is the best
	// of any as many cards of their node, and OnBestFreeSet the best of the cards that could
	// take the container when it was placed (Execute only).
	MultiCard, OnBestSet, OnBestFreeSet int
	// HighCurve is Curve for the pods above BE alone: the allocation (% of GPU capacity) they
	// hold at each arrived % of all pods (Priorities only).
	HighCurve []float64
	// Preemptions counts the pods placed by preempting, Preempted the pods they evicted, and
	// EvictedMilli the evicted pods' GPU request in milli-GPU (Preemption only).
	Preemptions, Preempted int
	EvictedMilli           int64
}

// AllocAt is the allocation % at arrived % a (NaN when the run did not get there).
func (r *Result) AllocAt(a int) float64 { return curveAt(r.Curve, a) }

// Execute replays the run through a fresh production cache.
func (r *Run) Execute() (*Result, error) {
	names := contract.DefaultNames()
	c := cache.New(names, klog.Background().V(10))
	if err := newCluster(r.Nodes, &names, c, r.HideLinks); err != nil {
		return nil, err
	}
	var p *placer
	var evicted func() (int64, int64)
	if r.Preemption {
		evicted = func() (int64, int64) { return p.preempt.take() }
	}
	res, err := r.replay(func(rng *rand.Rand) {
		if o, ok := r.Policy.(placement.Oracle); ok {
			o.Foresee(demands(r.Pods))
		}
		if s, ok := r.Policy.(placement.Seeded); ok {
			s.Seed(rng.Uint64())
		}
		p = newPlacer(r.Nodes, c, r.Policy, rng.Perm(len(r.Nodes))) // drawn either way
		p.extenderTies = r.ExtenderTieOrder
		p.multi = newMultiCard(r.Nodes)
		p.learnAtBind = r.LearnAtBind
		if s, ok := r.Policy.(placement.NodeSyncer); ok && r.SyncNodes {
			s.SyncNodes(c.Nodes())
		}
		if r.SampleNodes {
			p.sampler = &sampler{percentage: r.PercentageOfNodesToScore}
		}
		if r.Preemption {
			p.preempt = &preempter{}
		}
		p.dra = newDRAPlacer(r.DRA)
	}, func(pod *v1.Pod) (bool, error) { return p.submit(pod, &names) }, evicted)
	if err != nil {
		return nil, err
	}
	if e := p.preempt; e != nil {
		res.Preemptions, res.Preempted, res.EvictedMilli = e.preemptions, e.victims, e.evicted
	}
	res.Nodes = p.nodes
	if m := p.multi; m != nil {
		res.MultiCard, res.OnBestSet, res.OnBestFreeSet = m.containers, m.onBest, m.onBestFree
	}
	return res, nil
}

// Submit places one pod of the sequence, or rejects it, and says which; an error ends the run.
type Submit func(pod *v1.Pod) (placed bool, err error)

// ExecuteOn replays the run's exact submission sequence (the pods Execute would submit, in
// its order, as Kubernetes objects named alike) through submit, for instance a real
// kube-scheduler, and measures the outcome as Execute does. r.Policy is not used.
func (r *Run) ExecuteOn(submit Submit) (*Result, error) {
	return r.replay(func(*rand.Rand) {}, submit, nil)
}

// replay draws the workload from the run's seed, lets prepare draw from the same source, and
// submits the pods in order. evicted, when set, returns the GPU request (milli-GPU) of the pods
// evicted since its last call, all and high-priority.
func (r *Run) replay(prepare func(*rand.Rand), submit Submit, evicted func() (all, high int64)) (*Result, error) {
	start := time.Now()
	rng := newRand(r.Seed)
	names := contract.DefaultNames()
	capacity := capacityMilli(r.Nodes)
	pods := Workload(r.Pods, int64(r.Inflate*float64(capacity)), rng)
	prios, err := r.priorities(pods)
	if err != nil {
		return nil, err
	}
	prepare(rng)
	res := &Result{CapacityMilli: capacity}
	t := newTally(capacity, prios != nil)
	for i := range pods {
		pod := PodObject(&pods[i], i, &names)
		if prios != nil {
			pod.Spec.Priority = &prios[i]
		}
		placed, err := submit(pod)
		if err != nil {
			return nil, err
		}
		res.Submitted++
		res.Decisions = append(res.Decisions, placed)
		if placed {
			res.Placed++
		}
		t.add(pods[i].GPURequest(), placed, prios != nil && highPriority(prios[i]))
		if evicted != nil {
			t.evict(evicted())
		}
		t.record()
	}
	res.Curve, res.HighCurve = t.build()
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// priorities are the pods' priorities from their qos class; nil without Priorities or
// Preemption.
func (r *Run) priorities(pods []Pod) ([]int32, error) {
	if !r.Priorities && !r.Preemption {
		return nil, nil
	}
	out := make([]int32, len(pods))
	for i := range pods {
		p, err := QoSPriority(pods[i].QoS)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", pods[i].Name, err)
		}
		out[i] = p
	}
	return out, nil
}

// tally accumulates the arrived and allocated GPU (milli-GPU) of a replay into its curves: all
// pods, and the high-priority ones when asked.
type tally struct {
	arrived, used, usedHigh int64
	curve, high             *curveBuilder
}

func newTally(capacity int64, high bool) *tally {
	t := &tally{curve: newCurveBuilder(capacity)}
	if high {
		t.high = newCurveBuilder(capacity)
	}
	return t
}

// add counts a submitted pod asking milli, placed or not.
func (t *tally) add(milli int64, placed, high bool) {
	t.arrived += milli
	if placed {
		t.used += milli
		if high {
			t.usedHigh += milli
		}
	}
}

// evict takes back evicted pods' GPU.
func (t *tally) evict(all, high int64) { t.used, t.usedHigh = t.used-all, t.usedHigh-high }

// record adds the point after a submission to the curves.
func (t *tally) record() {
	t.curve.add(t.arrived, t.used)
	if t.high != nil {
		t.high.add(t.arrived, t.usedHigh)
	}
}

// build returns the curves, high nil when not asked.
func (t *tally) build() (all, high []float64) {
	if t.high != nil {
		high = t.high.build()
	}
	return t.curve.build(), high
}

func capacityMilli(nodes []Node) int64 {
	var t int64
	for i := range nodes {
		t += int64(nodes[i].GPUs) * MilliPerGPU
	}
	return t
}

// demands is the whole trace as an oracle policy is told it (FGD's typical pods come from it,
// placement.md §2.3): each pod's GPU request and CPU.
func demands(pods []Pod) []placement.Demand {
	out := make([]placement.Demand, len(pods))
	for i := range pods {
		p := &pods[i]
		out[i] = placement.Demand{Req: contract.PodRequest{Models: p.Models}, Res: placement.PodResources{MilliCPU: p.MilliCPU}}
		if p.NumGPU > 0 {
			out[i].Req.Containers = []contract.ContainerRequest{{Units: p.GPURequest(), GPUs: int(p.NumGPU)}}
		}
	}
	return out
}

// podFits is kube-scheduler's NodeResourcesFit for CPU and memory.
func podFits(n *placement.NodeInfo, res placement.PodResources) bool {
	return n.RequestedMilliCPU+res.MilliCPU <= n.AllocatableMilliCPU && n.RequestedMemory+res.Memory <= n.AllocatableMemory
}

// errNotPlaced is returned when the cache refuses the chosen placement, which means the
// simulator and the cache disagree.
var errNotPlaced = errors.New("cache refused the placement")
