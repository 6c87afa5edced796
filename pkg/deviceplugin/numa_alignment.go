package deviceplugin

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// ReasonTopologyMismatch is the Warning event on a pod one of whose containers kubelet aligned
// to other NUMA nodes than its cards': kubelet's Topology Manager kept the devices to NUMA
// nodes without the placement's cards, so kubelet did not take GetPreferredAllocation's
// answer. The container still runs on its placement's cards (the env names them).
const ReasonTopologyMismatch = "GPUShareTopologyMismatch"

// cardsOf counts ids per card; IDs the plugin never advertised are left out (Allocate refuses
// them before).
func (p *Plugin) cardsOf(ids []string) map[int]int64 {
	out := map[int]int64{}
	for _, id := range ids {
		if g, err := p.inv.gpuOf(id); err == nil {
			out[g]++
		}
	}
	return out
}

// numaNodesOf lists the distinct NUMA nodes of cards, sorted; known is false when any card's
// node is unknown.
func (p *Plugin) numaNodesOf(cards map[int]int64) (nodes []int, known bool) {
	for g := range cards {
		card, ok := p.inv.lookup(g)
		if !ok || card.NUMANode == nvml.NoNUMANode {
			return nil, false
		}
		if !slices.Contains(nodes, card.NUMANode) {
			nodes = append(nodes, card.NUMANode)
		}
	}
	slices.Sort(nodes)
	return nodes, true
}

// checkAlignment compares the cards of the device IDs kubelet gave a container (ids) with the
// cards of its placement. They agree whenever kubelet took GetPreferredAllocation's answer.
// When they do not, kubelet's records (PodResources, its NUMA alignment) name other cards than
// the container uses: logged, and a Warning event on the pod when the NUMA nodes differ, the
// one case where the pod loses what its Topology Manager policy promised.
func (p *Plugin) checkAlignment(ctx context.Context, ch *choice, ids []string) {
	given := p.cardsOf(ids)
	if slices.Equal(slices.Sorted(maps.Keys(given)), slices.Sorted(maps.Keys(ch.placement))) {
		return
	}
	logger := klog.FromContext(p.baseCtx(ctx))
	givenNUMA, givenKnown := p.numaNodesOf(given)
	placedNUMA, placedKnown := p.numaNodesOf(ch.placement)
	if !givenKnown || !placedKnown || slices.Equal(givenNUMA, placedNUMA) {
		logger.V(2).Info("Kubelet gave units of other cards than the placement's", "pod", klog.KObj(ch.pod),
			"container", ch.container.Name, "kubeletGPUs", slices.Sorted(maps.Keys(given)), "placementGPUs", slices.Sorted(maps.Keys(ch.placement)))
		return
	}
	msg := fmt.Sprintf("kubelet aligned container %s to NUMA node(s) %v (units of GPU %v), but its placement puts it on GPU %v (NUMA node(s) %v): "+
		"the container runs on GPU %v, away from the NUMA node kubelet's Topology Manager chose",
		ch.container.Name, givenNUMA, slices.Sorted(maps.Keys(given)), slices.Sorted(maps.Keys(ch.placement)), placedNUMA,
		slices.Sorted(maps.Keys(ch.placement)))
	logger.Info("Kubelet aligned a container to other NUMA nodes than its cards", "pod", klog.KObj(ch.pod),
		"container", ch.container.Name, "kubeletNUMA", givenNUMA, "placementNUMA", placedNUMA)
	p.warnPod(ctx, ch.pod, ReasonTopologyMismatch, msg)
}

// coversPlacement reports whether ids hold the placement's units on each of its cards.
func (p *Plugin) coversPlacement(ids []string, placement map[int]int64) bool {
	got := p.cardsOf(ids)
	for g, units := range placement {
		if got[g] < units {
			return false
		}
	}
	return true
}
