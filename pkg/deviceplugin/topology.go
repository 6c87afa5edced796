package deviceplugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// readTopology completes the cards' NUMA nodes and reads the node's link matrix, once, before
// the plugin serves: NVML's NUMA node where it knows it (platforms whose GPUs are NUMA nodes),
// else the PCI device's numa_node under sysfsRoot, as NVIDIA's device plugin reads it on x86.
// Neither can fail the plugin: a card whose NUMA node is unknown is advertised without one,
// and when any card's links cannot be read no card carries links (a matrix with holes would
// rank sets wrongly), which the log says.
func (inv *inventory) readTopology(logger klog.Logger, nv nvml.Interface, sysfsRoot string) {
	devs := make([]nvml.Device, len(inv.gpus))
	numa := make([]int, len(inv.gpus))
	for pos := range inv.gpus {
		g := &inv.gpus[pos]
		if g.NUMANode == nvml.NoNUMANode {
			n, err := sysfsNUMANode(sysfsRoot, g.BusID)
			if err != nil {
				logger.V(2).Info("NUMA node of the GPU unknown", "gpu", g.Index, "busID", g.BusID, "err", err)
			}
			g.NUMANode = n
		}
		if g.NUMANode > contract.MaxNUMANode {
			g.NUMANode = nvml.NoNUMANode
		}
		devs[pos], numa[pos] = g.Device, g.NUMANode
	}
	links, err := nvml.ReadTopology(nv, devs)
	if err != nil {
		logger.Info("GPU topology unknown: the node's cards are published without links", "err", err)
		return
	}
	inv.links = links
	rows := make([]string, len(links))
	for i := range links {
		rows[i] = contract.EncodeLinks(links, i)
	}
	logger.Info("Read the GPU topology", "numaNodes", numa, "links", rows)
}

// sysfsNUMANode reads <sysfsRoot>/bus/pci/devices/<busID>/numa_node; NoNUMANode when it is
// missing, unreadable or -1 (the kernel does not know, as on most single-socket machines).
func sysfsNUMANode(sysfsRoot, busID string) (int, error) {
	if busID == "" || busID != filepath.Base(busID) {
		return nvml.NoNUMANode, fmt.Errorf("no usable PCI bus ID %q", busID)
	}
	path := filepath.Join(sysfsRoot, "bus", "pci", "devices", busID, "numa_node")
	raw, err := os.ReadFile(path) //nolint:gosec // G304: sysfs, under the operator's --sysfs-root
	if err != nil {
		return nvml.NoNUMANode, fmt.Errorf("read NUMA node: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return nvml.NoNUMANode, fmt.Errorf("parse %s: %w", path, err)
	}
	if n < 0 {
		return nvml.NoNUMANode, nil
	}
	return n, nil
}

// linksRow is the card at position pos's row of the link matrix for the node annotation,
// with the grammar's version; "", 0 when the topology is unknown.
func (inv *inventory) linksRow(pos int) (string, int) {
	if inv.links == nil {
		return "", 0
	}
	return contract.EncodeLinks(inv.links, pos), contract.TopologyVersion
}
