package sim

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// ErrBadConfig is wrapped by command-line errors.
var ErrBadConfig = errors.New("bad configuration")

// Config is gpushare-sim's command line.
type Config struct {
	// NodesFile and PodsFile are the openb CSVs.
	NodesFile, PodsFile string
	// Policies are the policies to compare, comma-separated on the command line.
	Policies []string
	// Inflate is the workload's total GPU request as a multiple of capacity.
	Inflate float64
	// Seeds are the seeds, one run each.
	Seeds []int
	// JSON prints one JSON object per policy instead of a table.
	JSON bool
	// Markdown prints a Markdown table with the paper's figures instead.
	Markdown bool
	// CurveFile and PlotFile, when set, receive the curves as CSV and PNG.
	CurveFile, PlotFile string
	// Parallel is how many runs go at once.
	Parallel int
	// TieOrder is how ties between equally rated nodes are broken: TieOrderSeeded (a seeded
	// random order, the paper's protocol) or TieOrderExtender (the extender's, in production).
	TieOrder string
	// SampleNodes models kube-scheduler's node sampling (percentageOfNodesToScore): each pod
	// is placed among the nodes kube-scheduler would pass the extender.
	SampleNodes bool
	// PercentageOfNodesToScore is kube-scheduler's setting with SampleNodes; 0 is its
	// adaptive default (50 % minus 1 % per 125 nodes, at least 5 % and 100 nodes). It starts
	// as ShippedPercentageOfNodesToScore.
	PercentageOfNodesToScore int
	// LearnAtBind teaches a learning policy the placed pods with gpu-mem after placement, as
	// the extender learns at bind.
	LearnAtBind bool
	// SyncNodes hands a policy every node before the first pod, as the extender's policy sync.
	SyncNodes bool
	// Topology is the nodes' card topology: TopologyNone, TopologySynthetic or
	// TopologySyntheticBlind.
	Topology string
	// Preemption gives the pods the priorities of their qos class (QoSPriority) and runs each
	// policy twice, without and with GPU preemption (Run.Preemption).
	Preemption bool
	// DRA are the DRA variants each policy runs under (Run.DRA), nil for "off" (the policy
	// chooses node and card, the row they are compared with); empty: no DRA, as before.
	// kube-scheduler variants run once, whatever the policies.
	DRA []*DRA
}

// The tie orders of Config.TieOrder.
const (
	TieOrderSeeded   = "seeded"
	TieOrderExtender = "extender"
)

// ShippedPercentageOfNodesToScore is the percentageOfNodesToScore of the shipped
// KubeSchedulerConfigurations (config/), which --production models.
const ShippedPercentageOfNodesToScore = 30

// DefaultConfig is the paper's protocol with our default policy.
func DefaultConfig() Config {
	return Config{Policies: []string{policies.Default}, Inflate: 1.3, Seeds: seqInts(42, 51), Parallel: runtime.GOMAXPROCS(0),
		TieOrder: TieOrderSeeded, PercentageOfNodesToScore: ShippedPercentageOfNodesToScore, Topology: TopologyNone}
}

// AddFlags registers the flags on fs.
func (c *Config) AddFlags(fs *flag.FlagSet, registry policies.Registry) {
	fs.StringVar(&c.NodesFile, "nodes", c.NodesFile, "node CSV (openb_node_list_gpu_node.csv)")
	fs.StringVar(&c.PodsFile, "pods", c.PodsFile, "pod CSV (openb_pod_list_<trace>.csv)")
	fs.Func("policy", fmt.Sprintf("comma-separated policies from %v (default %s)", registry.Names(), strings.Join(c.Policies, ",")), func(s string) error {
		c.Policies = strings.Split(s, ",")
		return nil
	})
	fs.Float64Var(&c.Inflate, "inflate", c.Inflate, "total GPU request submitted, as a multiple of GPU capacity")
	fs.Func("seeds", "seeds: a range 42-51 or a list 42,43 (default 42-51)", func(s string) error {
		seeds, err := ParseSeeds(s)
		c.Seeds = seeds
		return err
	})
	fs.BoolVar(&c.JSON, "json", c.JSON, "print one JSON object per policy")
	fs.BoolVar(&c.Markdown, "markdown", c.Markdown, "print a Markdown table with the paper's FGD figure")
	fs.StringVar(&c.CurveFile, "curve", c.CurveFile, "write the allocation curves (arrived% -> allocated%) as CSV")
	fs.StringVar(&c.PlotFile, "plot", c.PlotFile, "draw the allocation curves as PNG, one line per policy")
	fs.IntVar(&c.Parallel, "parallel", c.Parallel, "runs at once")
	fs.BoolVar(&c.SampleNodes, "sample-nodes", c.SampleNodes, "place each pod among the nodes kube-scheduler passes the extender (its percentageOfNodesToScore sampling from a rotating start), as in production")
	fs.IntVar(&c.PercentageOfNodesToScore, "percentage-of-nodes-to-score", c.PercentageOfNodesToScore, "kube-scheduler's percentageOfNodesToScore for --sample-nodes (the shipped configurations' by default): 0 for its adaptive default, up to 100")
	fs.BoolVar(&c.LearnAtBind, "learn-at-bind", c.LearnAtBind, "a learning policy learns each placed pod with gpu-mem after placing it, as the extender learns at bind (default: every pod when submitted, the paper's protocol)")
	fs.BoolVar(&c.SyncNodes, "sync-nodes", c.SyncNodes, "hand a policy that keeps per-node state every node before the first pod, as the extender's policy sync does")
	fs.BoolFunc("production", "model production through kube-scheduler: --tie-order=extender --sample-nodes --learn-at-bind --sync-nodes", func(string) error {
		c.TieOrder, c.SampleNodes, c.LearnAtBind, c.SyncNodes = TieOrderExtender, true, true, true
		return nil
	})
	fs.StringVar(&c.Topology, "topology", c.Topology, "the nodes' card topology: none (openb's), synthetic (SyntheticLinks: NVSwitch boxes, 2-socket PCIe boxes, NVLinked pairs; placement sees it) or synthetic-blind (the same links for the report only: placement without topology)")
	fs.BoolVar(&c.Preemption, "preemption", c.Preemption, "give pods the priority of their qos class (Guaranteed > LS > Burstable > BE) and run each policy without and with GPU preemption as the extender preempts (placement.PlanPreemption); evicted pods are not resubmitted")
	fs.Func("dra", "comma-separated DRA variants, each run for every policy: off (the policy chooses node and card), an order the driver publishes the cards in, "+
		"which kube-scheduler's allocator takes first-fit ("+joinOrders()+"; the policy chooses the node knowing the allocator's card), naive-<order> "+
		"(the policy chooses the node with its own card), kube-<order> (kube-scheduler alone, no extender)", func(s string) error {
		c.DRA = nil
		for _, f := range strings.Split(s, ",") {
			v, err := ParseDRA(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			c.DRA = append(c.DRA, v)
		}
		return nil
	})
	fs.StringVar(&c.TieOrder, "tie-order", c.TieOrder, "ties between equally rated nodes: seeded (a seeded random order, the paper's protocol) or extender (the extender's order in production, a hash of pod and node names)")
}

// Validate reports every problem with c.
func (c *Config) Validate(registry policies.Registry) error {
	var errs []error
	if c.NodesFile == "" || c.PodsFile == "" {
		errs = append(errs, fmt.Errorf("%w: --nodes and --pods are required", ErrBadConfig))
	}
	for _, p := range c.Policies {
		if _, err := registry.New(p); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrBadConfig, err))
		}
	}
	if c.TieOrder != TieOrderSeeded && c.TieOrder != TieOrderExtender {
		errs = append(errs, fmt.Errorf("%w: --tie-order must be %s or %s, not %q", ErrBadConfig, TieOrderSeeded, TieOrderExtender, c.TieOrder))
	}
	switch c.Topology {
	case TopologyNone, TopologySynthetic, TopologySyntheticBlind:
	default:
		errs = append(errs, fmt.Errorf("%w: --topology must be %s, %s or %s, not %q", ErrBadConfig, TopologyNone, TopologySynthetic, TopologySyntheticBlind, c.Topology))
	}
	if c.Preemption && c.Topology != TopologyNone {
		errs = append(errs, fmt.Errorf("%w: --preemption is for runs without --topology", ErrBadConfig))
	}
	if len(c.DRA) > 0 && (c.Preemption || c.Topology != TopologyNone) {
		errs = append(errs, fmt.Errorf("%w: --dra is for runs without --preemption (DRA pods are not preempted) and --topology (the allocator ignores links)", ErrBadConfig))
	}
	if c.PercentageOfNodesToScore < 0 || c.PercentageOfNodesToScore > 100 {
		errs = append(errs, fmt.Errorf("%w: --percentage-of-nodes-to-score must be 0..100, not %d", ErrBadConfig, c.PercentageOfNodesToScore))
	}
	if c.Inflate <= 0 || len(c.Seeds) == 0 || c.Parallel < 1 {
		errs = append(errs, fmt.Errorf("%w: --inflate, --seeds and --parallel must be positive", ErrBadConfig))
	}
	return errors.Join(errs...)
}

// TraceName is the trace's short name: "default" for openb_pod_list_default.csv.
func (c *Config) TraceName() string {
	base := strings.TrimSuffix(filepath.Base(c.PodsFile), filepath.Ext(c.PodsFile))
	return strings.TrimPrefix(base, "openb_pod_list_")
}

// ParseSeeds reads "42-51" or "42,43,44".
func ParseSeeds(s string) ([]int, error) {
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err := errors.Join(err1, err2); err != nil || b < a {
			return nil, fmt.Errorf("%w: seeds %q", ErrBadConfig, s)
		}
		return seqInts(a, b), nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%w: seeds %q: %w", ErrBadConfig, s, err)
		}
		if v < 0 {
			return nil, fmt.Errorf("%w: seeds %q: seed %d is negative", ErrBadConfig, s, v)
		}
		out = append(out, v)
	}
	return out, nil
}

func seqInts(a, b int) []int {
	out := make([]int, 0, b-a+1)
	for v := a; v <= b; v++ {
		out = append(out, v)
	}
	return out
}
