package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// Main runs every policy of cfg over its seeds and writes the report to w, and the curve and
// plot files when asked.
func Main(cfg *Config, registry policies.Registry, w io.Writer) error {
	nodes, pods, err := LoadTrace(cfg.NodesFile, cfg.PodsFile)
	if err != nil {
		return err
	}
	if cfg.Topology != TopologyNone {
		nodes = WithSyntheticTopology(nodes)
	}
	sums, err := runAll(cfg, registry, nodes, pods)
	if err != nil {
		return err
	}
	if err := writeReport(w, cfg, sums); err != nil {
		return err
	}
	if cfg.CurveFile != "" {
		if err := writeFile(cfg.CurveFile, func(f io.Writer) error { return WriteCurves(f, sums) }); err != nil {
			return err
		}
	}
	if cfg.PlotFile != "" {
		return writeFile(cfg.PlotFile, func(f io.Writer) error { return Plot(f, sums) })
	}
	return nil
}

// runAll runs every policy of cfg over its seeds, with and without preemption when asked, and
// under each DRA variant when asked, and summarises each.
func runAll(cfg *Config, registry policies.Registry, nodes []Node, pods []Pod) ([]*Summary, error) {
	modes := []bool{false} // preempting or not; --preemption runs both, with the qos priorities
	if cfg.Preemption {
		modes = []bool{false, true}
	}
	variants := cfg.DRA
	if len(variants) == 0 {
		variants = []*DRA{nil}
	}
	var sums []*Summary
	var runs [][]*Result
	for i, name := range cfg.Policies {
		for _, preempt := range modes {
			for _, v := range variants {
				if v != nil && v.Node == DRANodeKube && i > 0 { // no policy in it: once is enough
					continue
				}
				results, err := runSeeds(cfg, registry, name, nodes, pods, preempt, v)
				if err != nil {
					return nil, err
				}
				s := Summarise(name, cfg.TraceName(), cfg.Seeds, results)
				if cfg.Topology != TopologyNone {
					s.Topology = cfg.Topology
				}
				if s.Preemption != nil {
					s.Preemption.On = preempt
				}
				if len(cfg.DRA) > 0 {
					s.markDRA(v)
				}
				sums, runs = append(sums, s), append(runs, results)
			}
		}
	}
	if len(cfg.DRA) > 0 {
		compareWithFull(sums, runs)
	}
	return sums, nil
}

// LoadTrace reads the node and pod CSVs.
func LoadTrace(nodesFile, podsFile string) ([]Node, []Pod, error) {
	nf, err := os.Open(nodesFile)
	if err != nil {
		return nil, nil, fmt.Errorf("nodes: %w", err)
	}
	defer func() { _ = nf.Close() }() // only read
	nodes, err := ReadNodes(nf)
	if err != nil {
		return nil, nil, fmt.Errorf("nodes %s: %w", nodesFile, err)
	}
	pf, err := os.Open(podsFile)
	if err != nil {
		return nil, nil, fmt.Errorf("pods: %w", err)
	}
	defer func() { _ = pf.Close() }() // only read
	pods, err := ReadPods(pf)
	if err != nil {
		return nil, nil, fmt.Errorf("pods %s: %w", podsFile, err)
	}
	return nodes, pods, nil
}

// runSeeds runs one policy once per seed, cfg.Parallel at a time, each with its own policy;
// with cfg.Preemption, with the qos priorities and preempting or not; under variant v of DRA
// when it is set.
func runSeeds(cfg *Config, registry policies.Registry, name string, nodes []Node, pods []Pod, preempt bool, v *DRA) ([]*Result, error) {
	results := make([]*Result, len(cfg.Seeds))
	errs := make([]error, len(cfg.Seeds))
	sem := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	for i, seed := range cfg.Seeds {
		policy, err := registry.New(name)
		if err != nil {
			return nil, err
		}
		run := &Run{Nodes: nodes, Pods: pods, Policy: policy, Inflate: cfg.Inflate, Seed: uint64(seed), //nolint:gosec // G115: ParseSeeds keeps seeds non-negative
			ExtenderTieOrder: cfg.TieOrder == TieOrderExtender, SampleNodes: cfg.SampleNodes, PercentageOfNodesToScore: cfg.PercentageOfNodesToScore,
			LearnAtBind: cfg.LearnAtBind, SyncNodes: cfg.SyncNodes, HideLinks: cfg.Topology == TopologySyntheticBlind,
			Priorities: cfg.Preemption, Preemption: preempt, DRA: v}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], errs[i] = run.Execute()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := write(f); err != nil {
		_ = f.Close() // the write's error is the one to report
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func writeReport(w io.Writer, cfg *Config, sums []*Summary) error {
	switch {
	case cfg.Markdown:
		return WriteMarkdown(w, sums)
	case !cfg.JSON:
		return WriteTable(w, sums)
	}
	enc := json.NewEncoder(w)
	for _, s := range sums {
		if err := enc.Encode(s); err != nil {
			return fmt.Errorf("encode: %w", err)
		}
	}
	return nil
}
