package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/gpushare/gpushare/pkg/sim"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// draReport is the JSON object on the last line of a --dra replay.
type draReport struct {
	Trace string `json:"trace"`
	Seed  int    `json:"seed"`
	// Mode is "dra".
	Mode string `json:"mode"`
	// Simulator is the simulator's --dra kube-index on the same sequence.
	Simulator  allocation       `json:"simulator_kube_index"`
	Production productionResult `json:"production"`
	// OvercommittedCards counts the cards whose allocated claims consumed more memory or cores
	// than the card publishes; ClaimProblems the bound pods' claims that do not hold their ask
	// and the allocated claims of no bound pod.
	OvercommittedCards int `json:"overcommitted_cards"`
	ClaimProblems      int `json:"claim_problems"`
	// ClaimsAllocAtEnd is the memory the allocated claims consumed at the end, in % of the
	// cards' memory; PlacedAllocAtEnd the memory the placed pods asked, likewise.
	ClaimsAllocAtEnd float64 `json:"claims_alloc_at_end"`
	PlacedAllocAtEnd float64 `json:"placed_alloc_at_end"`
	// SetupS is the wall time of creating the nodes and their slices; ReplayS that of the
	// replay (every pod created and decided, one at a time).
	SetupS  float64 `json:"setup_s"`
	ReplayS float64 `json:"replay_s"`
	// ClientQPS is kube-scheduler's and kube-controller-manager's client QPS (0: theirs).
	ClientQPS float64 `json:"client_qps"`
	// setup names kube-scheduler's configuration, for the table.
	setup string
	// gpuLatency and cpuLatency are create→bound p50/p99 of the placed pods with and without
	// gpu-mem, for the table.
	gpuLatency, cpuLatency [2]time.Duration
	// differ compares production's decisions with the simulator's.
	differ divergence
	check  draCheck
}

// newDRAReport reports production p of produced against the simulator's modelled; took are the
// wall times of the setup and the replay.
func newDRAReport(o options, modelled, produced *sim.Result, p *production, check draCheck, took [2]time.Duration) *draReport {
	pct := func(bytes int64) float64 {
		if check.capacity.CapacityBytes == 0 {
			return 0
		}
		return round2(100 * float64(bytes) / float64(check.capacity.CapacityBytes))
	}
	setup := "kube-scheduler's defaults without extenders"
	if o.SchedulerConfig != "" {
		setup = o.SchedulerConfig
	}
	return &draReport{
		Trace: o.trace, Seed: o.seed, Mode: "dra",
		Simulator:          allocationOf(modelled),
		Production:         productionOf(produced, p.latencies, took[1]),
		OvercommittedCards: len(check.capacity.Overcommitted),
		ClaimProblems:      len(check.claims.problems),
		ClaimsAllocAtEnd:   pct(check.capacity.ConsumedBytes),
		PlacedAllocAtEnd:   pct(check.placedBytes),
		SetupS:             round2(took[0].Seconds()),
		ReplayS:            round2(took[1].Seconds()),
		ClientQPS:          o.clientQPS,
		setup:              setup,
		gpuLatency:         quantiles(p.gpuLatencies),
		cpuLatency:         quantiles(p.cpuLatencies),
		differ:             diverge(produced, modelled),
		check:              check,
	}
}

// Write prints the table, then the JSON line.
func (r *draReport) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	pr := &framework.Printer{W: tw}
	pr.Printf("trace %s, seed %d; DRA: kube-scheduler alone with %s, driver %s publishing each node's cards by index; %s\n",
		r.Trace, r.Seed, r.setup, draDriver, clientLimits(r.ClientQPS))
	pr.Printf("%s\n", "\talloc % at 100 % arrived\talloc % at 130 % arrived\tplaced\trejected\tpods/s\tcreate→bound p99")
	pr.Printf("simulator, --dra kube-index\t%.2f\t%.2f\t\t\t\t\n", r.Simulator.AllocAt100, r.Simulator.AllocAt130)
	p := r.Production
	pr.Printf("production (kube-scheduler alone, DRA)\t%.2f\t%.2f\t%d\t%d\t%.1f\t%.1f ms\n",
		p.AllocAt100, p.AllocAt130, p.Placed, p.Rejected, p.PodsPerS, p.P99Ms)
	pr.Printf("production decided unlike the simulator\tplaced only in production %d\tonly in the simulator %d\tfirst at pod %d\t\t\t\n",
		r.differ.onlyProduction, r.differ.onlySimulator, r.differ.first)
	pr.Printf("placed on another node than the simulator's\t%d pods\tfirst at pod %d\t\t\t\t\n", r.differ.otherNode, r.differ.firstNode)
	pr.Printf("cards over capacity (claims' consumed memory, cores)\t%d of %d\t\t\t\t\t\n", r.OvercommittedCards, r.check.capacity.Cards)
	pr.Printf("claims not as asked\t%d (%d bound GPU pods)\t\t\t\t\t\n", r.ClaimProblems, r.check.claims.pods)
	pr.Printf("GPU memory at the end, %% of capacity\theld by allocated claims %.2f\tasked by placed pods %.2f\t\t\t\t\n", r.ClaimsAllocAtEnd, r.PlacedAllocAtEnd)
	pr.Printf("create→bound p50 / p99\tpods with gpu-mem %v / %v\tpods without %v / %v\t\t\t\t\n",
		r.gpuLatency[0].Round(time.Millisecond/10), r.gpuLatency[1].Round(time.Millisecond/10),
		r.cpuLatency[0].Round(time.Millisecond/10), r.cpuLatency[1].Round(time.Millisecond/10))
	pr.Printf("wall time\tnodes and slices %.1f s\treplay %.1f s\t\t\t\t\n", r.SetupS, r.ReplayS)
	return pr.Finish(tw.Flush, w, r)
}

// clientLimits says what client limits kube-scheduler and kube-controller-manager ran with.
func clientLimits(qps float64) string {
	if qps <= 0 {
		return "their default client limits"
	}
	return fmt.Sprintf("their clients at QPS %g / burst %g", qps, 2*qps)
}
