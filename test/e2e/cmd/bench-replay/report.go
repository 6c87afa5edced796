package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/gpushare/gpushare/pkg/sim"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// allocation is a run's allocation at 100 % and 130 % of capacity arrived.
type allocation struct {
	AllocAt100 float64 `json:"alloc_at_100"`
	AllocAt130 float64 `json:"alloc_at_130"`
}

// productionResult is allocation plus what the real control plane took.
type productionResult struct {
	allocation
	Placed   int     `json:"placed"`
	Rejected int     `json:"rejected"`
	PodsPerS float64 `json:"pods_per_s"`
	P99Ms    float64 `json:"p99_ms"`
}

// report is the JSON object on the last line.
type report struct {
	Trace  string `json:"trace"`
	Policy string `json:"policy"`
	Seed   int    `json:"seed"`
	// Simulator is the simulator's model of production (the extender's tie order, kube-scheduler's
	// node sampling, learning at bind); Paper the simulator under the FGD paper's protocol.
	Simulator          allocation       `json:"simulator"`
	Paper              allocation       `json:"simulator_paper_protocol"`
	Production         productionResult `json:"production"`
	OvercommittedCards int              `json:"overcommitted_cards"`
	// setup names the scheduler configuration and options, for the table.
	setup string
	// percentage is the configuration's percentageOfNodesToScore (0: adaptive), for the table.
	percentage int32
	// gpuLatency and cpuLatency are create→bound p50/p99 of the placed pods with and without
	// gpu-mem, for the table.
	gpuLatency, cpuLatency [2]time.Duration
	// differ compares production's decisions with the simulator's model of production.
	differ divergence
	// inv is what the invariant check found after production.
	inv framework.Invariants
}

// divergence counts the pods one run placed and the other rejected, and those both placed on
// different nodes.
type divergence struct {
	onlyProduction, onlySimulator, otherNode int
	// first is the index of the first pod decided differently, -1 if none; firstNode the first
	// placed on different nodes.
	first, firstNode int
}

// diverge compares two runs of the same submission sequence, pod by pod.
func diverge(production, simulator *sim.Result) divergence {
	d := divergence{first: -1, firstNode: -1}
	for i := range min(len(production.Nodes), len(simulator.Nodes)) {
		if p, s := production.Nodes[i], simulator.Nodes[i]; p != "" && s != "" && p != s {
			if d.firstNode < 0 {
				d.firstNode = i
			}
			d.otherNode++
		}
	}
	for i := range min(len(production.Decisions), len(simulator.Decisions)) {
		p, s := production.Decisions[i], simulator.Decisions[i]
		if p == s {
			continue
		}
		if d.first < 0 {
			d.first = i
		}
		if p {
			d.onlyProduction++
		} else {
			d.onlySimulator++
		}
	}
	return d
}

// quantiles are the p50 and p99 of ds.
func quantiles(ds []time.Duration) [2]time.Duration {
	return [2]time.Duration{framework.Percentile(ds, 0.5), framework.Percentile(ds, 0.99)}
}

func newReport(o options, simulated, produced *sim.Result, latencies []time.Duration, elapsed time.Duration, inv framework.Invariants) report {
	return report{
		Trace: o.trace, Policy: o.policy, Seed: o.seed,
		Simulator:          allocationOf(simulated),
		Production:         productionOf(produced, latencies, elapsed),
		OvercommittedCards: len(inv.Overcommitted),
		setup:              setupOf(o),
		inv:                inv,
	}
}

// productionOf is what production did: its allocation, decisions, pods submitted per second of
// elapsed and create→bound p99 of latencies.
func productionOf(produced *sim.Result, latencies []time.Duration, elapsed time.Duration) productionResult {
	return productionResult{
		allocation: allocationOf(produced),
		Placed:     produced.Placed, Rejected: produced.Submitted - produced.Placed,
		PodsPerS: round2(float64(produced.Submitted) / elapsed.Seconds()),
		P99Ms:    round2(float64(framework.Percentile(latencies, 0.99).Microseconds()) / 1000),
	}
}

func setupOf(o options) string {
	cfg := "shipped config/scheduler-config.yaml"
	if o.SchedulerConfig != "" {
		cfg = o.SchedulerConfig
	}
	if o.taintGPUNodes {
		cfg += ", GPU nodes tainted for pods without gpu-mem"
	}
	return cfg
}

func allocationOf(r *sim.Result) allocation {
	return allocation{AllocAt100: round2(r.AllocAt(100)), AllocAt130: round2(r.AllocAt(130))}
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// Write prints the table, then the JSON line.
func (r report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	pr := &framework.Printer{W: tw}
	pr.Printf("trace %s, policy %s, seed %d; kube-scheduler with %s\n", r.Trace, r.Policy, r.Seed, r.setup)
	pr.Printf("%s\n", "\talloc % at 100 % arrived\talloc % at 130 % arrived\tplaced\trejected\tpods/s\tcreate→bound p99")
	pr.Printf("simulator, the paper's protocol\t%.2f\t%.2f\t\t\t\t\n", r.Paper.AllocAt100, r.Paper.AllocAt130)
	pr.Printf("simulator, production's model (%s)\t%.2f\t%.2f\t\t\t\t\n", r.modelName(), r.Simulator.AllocAt100, r.Simulator.AllocAt130)
	p := r.Production
	pr.Printf("production (kube-scheduler + extender)\t%.2f\t%.2f\t%d\t%d\t%.1f\t%.1f ms\n",
		p.AllocAt100, p.AllocAt130, p.Placed, p.Rejected, p.PodsPerS, p.P99Ms)
	pr.Printf("production decided unlike the model\tplaced only in production %d\tonly in the simulator %d\tfirst at pod %d\t\t\t\n",
		r.differ.onlyProduction, r.differ.onlySimulator, r.differ.first)
	pr.Printf("placed on another node than the model's\t%d pods\tfirst at pod %d\t\t\t\t\n", r.differ.otherNode, r.differ.firstNode)
	pr.Printf("cards over capacity\t%d\t\t\t\t\t\n", r.OvercommittedCards)
	pr.Printf("create→bound p50 / p99\tpods with gpu-mem %v / %v\tpods without %v / %v\t\t\t\t\n",
		r.gpuLatency[0].Round(time.Millisecond/10), r.gpuLatency[1].Round(time.Millisecond/10),
		r.cpuLatency[0].Round(time.Millisecond/10), r.cpuLatency[1].Round(time.Millisecond/10))
	return pr.Finish(tw.Flush, w, r)
}

// modelName says what the simulator's model of production assumes.
func (r report) modelName() string {
	sampling := "adaptive percentageOfNodesToScore"
	if r.percentage > 0 {
		sampling = fmt.Sprintf("percentageOfNodesToScore %d", r.percentage)
	}
	return "extender's ties, " + sampling + ", learning at bind"
}
