package sim

import (
	"math"
)

// Stat is a mean and a sample standard deviation.
type Stat struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
}

// Summary is the JSON report of one policy on one trace over several seeds.
type Summary struct {
	Policy               string  `json:"policy"`
	Trace                string  `json:"trace"`
	Seeds                []int   `json:"seeds"`
	AllocAt100           Stat    `json:"alloc_at_100"`
	AllocAt130           Stat    `json:"alloc_at_130"`
	UnallocatedGPUsAt100 float64 `json:"unallocated_gpus_at_100"`
	PodsSubmitted        int     `json:"pods_submitted"`
	Seconds              float64 `json:"seconds"`
	// Topology is Config.Topology, empty for TopologyNone.
	Topology string `json:"topology,omitempty"`
	// MultiCard is the mean per run of Result.MultiCard; OnBestSet and OnBestFreeSet are the
	// shares of them (%) on their node's best set and on the best set of the cards then free
	// (Result.OnBestSet, OnBestFreeSet). Nil when no run placed such a container.
	MultiCard     float64 `json:"multi_card_containers,omitempty"`
	OnBestSet     *Stat   `json:"on_best_set_pct,omitempty"`
	OnBestFreeSet *Stat   `json:"on_best_free_set_pct,omitempty"`
	// Preemption is set for runs with the qos column's priorities (--preemption).
	Preemption *PreemptionSummary `json:"preemption,omitempty"`
	// DRA is the runs' DRA variant (DRA.String: "off" for the policy's own node and card), empty
	// without --dra; VsFull compares them with the runs without DRA (dra_report.go).
	DRA    string         `json:"dra,omitempty"`
	VsFull *DRAComparison `json:"vs_full,omitempty"`
	dra    *DRA
	curve  []Stat
}

// PreemptionSummary is what runs with priorities measured of preemption: means per run.
type PreemptionSummary struct {
	// On: pods preempted (Run.Preemption); otherwise the same runs without preemption.
	On bool `json:"on"`
	// HighAllocAt100 is the allocation (% of GPU capacity) held by the pods above BE at
	// arrived 100 % (Result.HighCurve).
	HighAllocAt100 Stat `json:"high_priority_alloc_at_100"`
	// Preemptions, PodsPreempted and GPUsEvicted are Result.Preemptions, Preempted and
	// EvictedMilli in GPUs.
	Preemptions   float64 `json:"preemptions"`
	PodsPreempted float64 `json:"pods_preempted"`
	GPUsEvicted   float64 `json:"gpus_evicted"`
}

// Summarise combines the runs of one policy on one trace (one Result per seed). PodsSubmitted
// and Seconds are means per run.
func Summarise(policy, trace string, seeds []int, results []*Result) *Summary {
	s := &Summary{Policy: policy, Trace: trace, Seeds: seeds}
	if len(results) == 0 {
		return s
	}
	s.AllocAt100 = statOf(results, func(r *Result) float64 { return r.AllocAt(100) })
	s.AllocAt130 = statOf(results, func(r *Result) float64 { return r.AllocAt(130) })
	gpus := float64(results[0].CapacityMilli) / MilliPerGPU
	s.UnallocatedGPUsAt100 = round2(gpus * (100 - s.AllocAt100.Mean) / 100)
	s.PodsSubmitted = int(math.Round(statOf(results, func(r *Result) float64 { return float64(r.Submitted) }).Mean))
	s.Seconds = round2(statOf(results, func(r *Result) float64 { return r.Seconds }).Mean)
	s.summariseMultiCard(results)
	s.summarisePreemption(results)
	for a := 0; ; a++ {
		st := statOf(results, func(r *Result) float64 { return r.AllocAt(a) })
		if math.IsNaN(st.Mean) {
			break
		}
		s.curve = append(s.curve, st)
	}
	return s
}

// summariseMultiCard fills MultiCard, OnBestSet and OnBestFreeSet when a run placed a
// multi-card container on a node with links.
func (s *Summary) summariseMultiCard(results []*Result) {
	share := func(part func(*Result) int) *Stat {
		st := statOf(results, func(r *Result) float64 {
			if r.MultiCard == 0 {
				return math.NaN()
			}
			return 100 * float64(part(r)) / float64(r.MultiCard)
		})
		return &st
	}
	if s.MultiCard = statOf(results, func(r *Result) float64 { return float64(r.MultiCard) }).Mean; s.MultiCard == 0 {
		return
	}
	s.OnBestSet = share(func(r *Result) int { return r.OnBestSet })
	s.OnBestFreeSet = share(func(r *Result) int { return r.OnBestFreeSet })
}

// summarisePreemption fills Preemption when the runs had priorities; On is the caller's.
func (s *Summary) summarisePreemption(results []*Result) {
	if results[0].HighCurve == nil {
		return
	}
	mean := func(f func(*Result) float64) float64 { return statOf(results, f).Mean }
	s.Preemption = &PreemptionSummary{
		HighAllocAt100: statOf(results, func(r *Result) float64 { return curveAt(r.HighCurve, 100) }),
		Preemptions:    mean(func(r *Result) float64 { return float64(r.Preemptions) }),
		PodsPreempted:  mean(func(r *Result) float64 { return float64(r.Preempted) }),
		GPUsEvicted:    mean(func(r *Result) float64 { return float64(r.EvictedMilli) / MilliPerGPU }),
	}
}

// Curve is the mean and sd of the allocation % at each arrived % (index).
func (s *Summary) Curve() []Stat { return s.curve }

// statOf is the mean and sample sd of f over results, ignoring NaN values; NaN when none.
func statOf(results []*Result, f func(*Result) float64) Stat {
	vals := make([]float64, 0, len(results))
	for _, r := range results {
		vals = append(vals, f(r))
	}
	return statOfValues(vals)
}

// statOfValues is the mean and sample sd of vals, ignoring NaN values; NaN when none.
func statOfValues(all []float64) Stat {
	var vals []float64
	for _, v := range all {
		if !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return Stat{Mean: math.NaN(), SD: math.NaN()}
	}
	mean := 0.0
	for _, v := range vals {
		mean += v
	}
	mean /= float64(len(vals))
	ss := 0.0
	for _, v := range vals {
		ss += (v - mean) * (v - mean)
	}
	sd := 0.0
	if len(vals) > 1 {
		sd = math.Sqrt(ss / float64(len(vals)-1))
	}
	return Stat{Mean: round2(mean), SD: round2(sd)}
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }
