package fgd

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// DefaultCoverage is the share of pods FGD's typical-pod set covers (placement.md §2.3).
const DefaultCoverage = 0.95

// minTaskCPU is kube-scheduler's non-zero default CPU request, which FGD applies to task types.
const minTaskCPU = 100

// TaskShape is a kind of pod as fragmentation sees it: CPU, cards, units per card and models.
type TaskShape struct {
	// MilliCPU is the CPU request in millicores.
	MilliCPU int64
	// GPUs is the number of cards; 0 for a pod without GPU memory.
	GPUs int
	// PerGPU is the units taken on each card.
	PerGPU int64
	// Models is the accepted card models joined with "|"; empty means any.
	Models string
}

// ShapeOf is the shape of a pod with GPU request req and CPU request milliCPU. A pod whose
// containers differ is described by its largest per-card ask over its most cards.
func ShapeOf(req *gpumem.PodRequest, milliCPU int64) TaskShape {
	s := TaskShape{MilliCPU: max(milliCPU, minTaskCPU), Models: strings.Join(req.Models, "|")}
	for _, c := range req.Containers {
		s.GPUs, s.PerGPU = max(s.GPUs, c.GPUs), max(s.PerGPU, c.PerGPU())
	}
	return s
}

// TaskType is a shape with its popularity.
type TaskType struct {
	TaskShape
	// Weight is the popularity p_m; the weights of a Distribution sum to 1.
	Weight float64
	models []string
}

// Distribution is an immutable set of task types ("typical pods"), FGD's model of the workload.
// For fast fragmentation sums the GPU types are also grouped by card shape (cards, units per
// card, models), the CPU requests of each group ascending.
type Distribution struct {
	types   []TaskType
	groups  []typeGroup
	cpuOnly float64 // total weight of types without GPUs
	// cpuPerUnit is the CPU the GPU task types ask per unit of GPU, weighted by popularity.
	cpuPerUnit float64
}

// typeGroup is the task types sharing a card shape.
type typeGroup struct {
	gpus   int
	perGPU int64
	models string
	list   []string
	cpus   []int64   // ascending
	cum    []float64 // cum[i] is the weight of types cpus[:i+1]
	all    float64   // the group's weight, cum's last element
}

// weightFitting is the weight of the group's types whose CPU request is at most cpu.
func (g *typeGroup) weightFitting(cpu int64) float64 {
	w := 0.0
	for i, c := range g.cpus {
		if c > cpu {
			break
		}
		w = g.cum[i]
	}
	return w
}

// newDistribution groups types (weights already normalised).
func newDistribution(types []TaskType) *Distribution {
	d := &Distribution{types: types}
	byShape := map[TaskShape]int{}
	for _, t := range types {
		if t.GPUs == 0 {
			d.cpuOnly += t.Weight
			continue
		}
		key := TaskShape{GPUs: t.GPUs, PerGPU: t.PerGPU, Models: t.Models}
		i, ok := byShape[key]
		if !ok {
			i = len(d.groups)
			byShape[key] = i
			d.groups = append(d.groups, typeGroup{gpus: t.GPUs, perGPU: t.PerGPU, models: t.Models, list: t.models})
		}
		d.groups[i].cpus = append(d.groups[i].cpus, t.MilliCPU)
		d.groups[i].cum = append(d.groups[i].cum, t.Weight)
	}
	for i := range d.groups {
		d.groups[i].accumulate()
	}
	var cpu, units float64
	for _, t := range types {
		if t.GPUs > 0 {
			cpu += t.Weight * float64(t.MilliCPU)
			units += t.Weight * float64(t.PerGPU) * float64(t.GPUs)
		}
	}
	if units > 0 {
		d.cpuPerUnit = cpu / units
	}
	return d
}

// accumulate sorts the group's CPU requests and turns its weights into running sums.
func (g *typeGroup) accumulate() {
	idx := make([]int, len(g.cpus))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(g.cpus[a], g.cpus[b]) })
	cpus, cum := make([]int64, len(idx)), make([]float64, len(idx))
	sum := 0.0
	for k, i := range idx {
		sum += g.cum[i]
		cpus[k], cum[k] = g.cpus[i], sum
	}
	g.cpus, g.cum, g.all = cpus, cum, sum
}

// Types returns the task types, most popular first.
func (d *Distribution) Types() []TaskType {
	if d == nil {
		return nil
	}
	return slices.Clone(d.types)
}

// TypicalDistribution keeps the most popular shapes of counts whose cumulative count reaches
// coverage of the total, as FGD's GetTypicalPods does, and renormalises their weights. Ties in
// count go to the larger shape (CPU, units per card, cards, models, descending).
func TypicalDistribution(counts map[TaskShape]float64, coverage float64) *Distribution {
	types := make([]TaskType, 0, len(counts))
	total := 0.0
	for s, c := range counts {
		if c > 0 {
			types = append(types, TaskType{TaskShape: s, Weight: c})
			total += c
		}
	}
	slices.SortFunc(types, comparePopularity)
	kept, sum := 0, 0.0
	for kept < len(types) && sum < coverage*total {
		sum += types[kept].Weight
		kept++
	}
	types = types[:kept]
	for i := range types {
		types[i].Weight /= sum
		types[i].models = gpumem.ParseModels(types[i].Models)
	}
	return newDistribution(types)
}

func comparePopularity(a, b TaskType) int {
	return cmp.Or(cmp.Compare(b.Weight, a.Weight), cmp.Compare(b.MilliCPU, a.MilliCPU),
		cmp.Compare(b.PerGPU, a.PerGPU), cmp.Compare(b.GPUs, a.GPUs), cmp.Compare(b.Models, a.Models))
}
