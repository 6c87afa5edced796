package nvml

import (
	"fmt"

	"github.com/gpushare/gpushare/pkg/contract"
)

// ReadTopology reads what joins every pair of devs (as Device returned them, in the order the
// matrix is wanted): links[i][j] for i != j, the diagonal left at its zero value. Two cards
// joined by NVLink get NV<n>, n their links to each other; on NVSwitch systems every card that
// reaches NVSwitches is joined to every other such card by the fewer of their switch links,
// as nvidia-smi shows NV18 between any two H100s of an HGX board. Other pairs get the PCIe
// level of their common ancestor. Any failure is an error: a matrix with holes would rank
// cards wrongly, so the caller publishes none.
func ReadTopology(nv Interface, devs []Device) ([][]contract.Link, error) {
	byBus := make(map[string]int, len(devs))
	for pos, d := range devs {
		if d.BusID != "" {
			byBus[d.BusID] = pos
		}
	}
	direct := make([][]int, len(devs))
	switchLinks := make([]int, len(devs))
	for i, d := range devs {
		direct[i] = make([]int, len(devs))
		links, err := nv.NVLinks(d.Index)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", d.Index, err)
		}
		for _, l := range links {
			j, isCard := byBus[l.BusID]
			switch {
			case l.Remote == RemoteSwitch, l.Remote == RemoteUnknown && !isCard:
				switchLinks[i]++
			case (l.Remote == RemoteGPU || l.Remote == RemoteUnknown) && isCard && j != i:
				direct[i][j]++
			}
		}
	}
	out := make([][]contract.Link, len(devs))
	for i := range out {
		out[i] = make([]contract.Link, len(devs))
	}
	for i := range devs {
		for j := range i {
			l, err := pairLink(nv, devs[i], devs[j], max(direct[i][j], direct[j][i]), min(switchLinks[i], switchLinks[j]))
			if err != nil {
				return nil, err
			}
			out[i][j], out[j][i] = l, l
		}
	}
	return out, nil
}

// pairLink is what joins a and b, given their direct and (shared) NVSwitch links.
func pairLink(nv Interface, a, b Device, direct, viaSwitch int) (contract.Link, error) {
	if n := direct + viaSwitch; n > 0 {
		return contract.NVLinkOf(min(n, contract.MaxNVLinks)), nil
	}
	l, err := nv.CommonAncestor(a.Index, b.Index)
	if err != nil {
		return contract.LinkSYS, fmt.Errorf("GPUs %d and %d: %w", a.Index, b.Index, err)
	}
	return l, nil
}
