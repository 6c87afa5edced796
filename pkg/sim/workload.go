package sim

import (
	"math/rand/v2"
	"slices"
	"strings"
)

// Workload returns the pods in the order they are submitted, as in the FGD paper's protocol
// (placement.md §4): the trace sorted by name and shuffled; then, while the total GPU request is
// below target milli-GPU, clones drawn uniformly with replacement from the name-sorted trace are
// appended until the next one would exceed target; or, when the trace asks more than target,
// uniformly random pods are removed until it fits.
func Workload(pods []Pod, target int64, rng *rand.Rand) []Pod {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b Pod) int { return strings.Compare(a.Name, b.Name) })
	out := slices.Clone(sorted)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	total := int64(0)
	for i := range out {
		total += out[i].GPURequest()
	}
	if total > target {
		return deflate(out, total, target, rng)
	}
	return inflate(out, sorted, total, target, rng)
}

func inflate(out, sorted []Pod, total, target int64, rng *rand.Rand) []Pod {
	if len(sorted) == 0 || total == 0 {
		return out
	}
	for {
		p := sorted[rng.IntN(len(sorted))]
		if total+p.GPURequest() > target {
			return out
		}
		total += p.GPURequest()
		out = append(out, p)
	}
}

func deflate(out []Pod, total, target int64, rng *rand.Rand) []Pod {
	for total > target && len(out) > 0 {
		i := rng.IntN(len(out))
		total -= out[i].GPURequest()
		out = slices.Delete(out, i, i+1)
	}
	return out
}
