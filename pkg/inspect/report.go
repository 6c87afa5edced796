package inspect

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Schema identifiers of the JSON/YAML output; see docs/inspect.md.
const (
	// APIVersion is the version of the Report schema.
	APIVersion = "gpushare.io/v1alpha1"
	// Kind is the kind of the Report document.
	Kind = "GPUShareInspect"
)

// Report is the document `-o json|yaml` prints and every table view is rendered from.
type Report struct {
	// APIVersion is always APIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind is always Kind.
	Kind string `json:"kind"`
	// Unit labels every memory figure, e.g. "GiB".
	Unit string `json:"unit"`
	// UnitBytes is the size of one unit in bytes.
	UnitBytes int64 `json:"unitBytes"`
	// Namespace is the namespace pods were limited to; empty means all namespaces.
	Namespace string `json:"namespace,omitempty"`
	// Nodes are the GPU-sharing nodes, sorted by name.
	Nodes []NodeReport `json:"nodes"`
	// Cluster sums the nodes.
	Cluster Summary `json:"cluster"`
}

// Summary is allocated and total memory in units.
type Summary struct {
	// Allocated is the units held by pods, on cards or pending.
	Allocated int64 `json:"allocated"`
	// Total is the units of all cards.
	Total int64 `json:"total"`
}

// Percent is Allocated as a whole percentage of Total, rounded down; 0 when Total is 0.
func (s Summary) Percent() int64 {
	if s.Total <= 0 {
		return 0
	}
	return s.Allocated * 100 / s.Total
}

// NodeReport is one GPU-sharing node.
type NodeReport struct {
	// Name is the node's name.
	Name string `json:"name"`
	// Address is the node's InternalIP (else its first address); empty when it has none.
	Address string `json:"address"`
	// Inventory says where card sizes came from: "annotation", "even-split" or "resourceslice"
	// (the DRA driver's slices).
	Inventory placement.InventorySource `json:"inventory"`
	// Mode is ModeDRA when the node's cards come from the DRA driver's ResourceSlices and what
	// pods hold from their allocated ResourceClaims; empty (absent) for a device-plugin node.
	Mode string `json:"mode,omitempty"`
	// MemoryLimit is how the node's share-plugin holds containers to the memory they asked
	// (contract.MemoryLimit*: hami-core, none, unavailable), from its inventory annotation;
	// empty when the plugin does not say (older plugins, no annotation).
	MemoryLimit string `json:"memoryLimit,omitempty"`
	// GPUs are the node's cards in index order.
	GPUs []GPUReport `json:"gpus"`
	// PendingUnits are held by pods on the node that have no placement on a card.
	PendingUnits int64 `json:"pendingUnits"`
	// Summary is the node's allocated (cards plus pending) and total units.
	Summary
	// Pods hold memory on the node, sorted by namespace/name (limited to Report.Namespace).
	Pods []PodReport `json:"pods"`
}

// GPUReport is one card.
type GPUReport struct {
	// Index is the NVML index.
	Index int `json:"index"`
	// UUID is the card's UUID; empty without the device plugin's node annotation.
	UUID string `json:"uuid,omitempty"`
	// Model is the card's model; empty without the device plugin's node annotation.
	Model string `json:"model,omitempty"`
	// Healthy is false when the device plugin reported the card unhealthy.
	Healthy bool `json:"healthy"`
	// Allocated is the units pods hold on the card.
	Allocated int64 `json:"allocated"`
	// Total is the card's memory in units.
	Total int64 `json:"total"`
	// MemoryBytes, ReservedBytes and UsableBytes are the card's total memory, the part no
	// container can get (the driver's and the operator's reserve) and the rest, which Total
	// counts, from the device plugin's node annotation; absent when it does not say.
	MemoryBytes   int64 `json:"memoryBytes,omitempty"`
	ReservedBytes int64 `json:"reservedBytes,omitempty"`
	UsableBytes   int64 `json:"usableBytes,omitempty"`
	// NUMA is the card's NUMA node from the device plugin's node annotation; absent when
	// unknown.
	NUMA *int `json:"numa,omitempty"`
	// Links is the card's row of the node's link matrix as the device plugin publishes it
	// (docs/contract.md: "X" for itself, NV<n>, PIX, PXB, PHB, NODE or SYS per card in index
	// order); empty when unknown.
	Links string `json:"links,omitempty"`
}

// PodReport is one pod holding memory.
type PodReport struct {
	// Namespace is the pod's namespace.
	Namespace string `json:"namespace"`
	// Name is the pod's name.
	Name string `json:"name"`
	// UID is the pod's UID.
	UID types.UID `json:"uid"`
	// Units is the pod's effective gpu-mem ask.
	Units int64 `json:"units"`
	// PendingUnits are the pod's units not on a card of the node: all of them when it has no
	// placement annotation (bound by another scheduler, nodeName set by hand).
	PendingUnits int64 `json:"pendingUnits"`
	// GPUs maps card index (as a string) to the units the pod holds there.
	GPUs map[string]int64 `json:"gpus,omitempty"`
	// Allocation is the per-container placement as in the pod annotation
	// scheduler.framework.gpushare.allocation: container key → card index → units.
	Allocation contract.Allocation `json:"allocation,omitempty"`
	// Links says what joins the pod's cards when it holds memory on several, e.g.
	// "GPU0+GPU1 (NV4)" ("(unknown)" when the node publishes no topology); empty otherwise.
	Links string `json:"links,omitempty"`
}

// BuildReport feeds nodes and pods to the extender's cache and renders its snapshots. Only
// nodes with cards or pending memory are kept; when namespace is not empty, only that
// namespace's pods are listed (node and cluster totals still count every pod).
func BuildReport(names contract.Names, c cache.Cache, nodes []v1.Node, pods []v1.Pod, namespace string) Report {
	addrs := make(map[string]string, len(nodes))
	limits := make(map[string]string, len(nodes))
	tops := make(map[string]nodeTopology, len(nodes))
	for i := range nodes {
		c.SetNode(&nodes[i])
		addrs[nodes[i].Name] = nodeAddress(&nodes[i])
		limits[nodes[i].Name] = memoryLimitOf(&nodes[i], &names)
		tops[nodes[i].Name] = topologyOf(&nodes[i], &names)
	}
	for i := range pods {
		c.SetPod(&pods[i])
	}
	r := Report{APIVersion: APIVersion, Kind: Kind, Unit: names.UnitLabel(), UnitBytes: names.UnitBytes(),
		Namespace: namespace, Nodes: []NodeReport{}}
	for _, n := range c.Nodes() {
		if !n.SharesGPUs() {
			continue
		}
		nr := nodeReport(n, addrs[n.Name], namespace, tops[n.Name])
		nr.MemoryLimit = limits[n.Name]
		r.Cluster.Allocated += nr.Allocated
		r.Cluster.Total += nr.Total
		r.Nodes = append(r.Nodes, nr)
	}
	sort.Slice(r.Nodes, func(i, j int) bool { return r.Nodes[i].Name < r.Nodes[j].Name })
	return r
}

func nodeReport(n *placement.NodeInfo, addr, namespace string, top nodeTopology) NodeReport {
	nr := NodeReport{Name: n.Name, Address: addr, Inventory: n.Inventory, PendingUnits: n.PendingUnits,
		Summary: Summary{Allocated: n.UsedUnits(), Total: n.TotalUnits()},
		GPUs:    make([]GPUReport, 0, len(n.GPUs)), Pods: []PodReport{}}
	if n.Inventory == placement.FromResourceSlice {
		nr.Mode = ModeDRA
	}
	for _, g := range n.GPUs {
		mem := top.memory[g.Index]
		nr.GPUs = append(nr.GPUs, GPUReport{Index: g.Index, UUID: g.UUID, Model: g.Model, Healthy: g.Healthy,
			Allocated: g.Used, Total: g.Capacity, NUMA: top.numa[g.Index], Links: top.links[g.Index],
			MemoryBytes: mem.MemoryBytes, ReservedBytes: mem.ReservedBytes, UsableBytes: mem.UsableBytes})
	}
	for i := range n.Pods {
		if namespace == "" || n.Pods[i].Namespace == namespace {
			pr := podReport(&n.Pods[i], n)
			if cards := pr.cards(); len(cards) > 1 {
				pr.Links = top.describe(cards)
			}
			nr.Pods = append(nr.Pods, pr)
		}
	}
	return nr
}

// podReport renders a pod as the cache charges it: units on cards the node has, the rest
// pending.
func podReport(p *placement.PodInfo, n *placement.NodeInfo) PodReport {
	pr := PodReport{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Units: p.Units}
	if p.Allocation == nil {
		pr.PendingUnits = p.Units
		return pr
	}
	pr.Allocation = p.Allocation.Clone()
	pr.GPUs = map[string]int64{}
	for g, u := range p.Allocation.PerGPU() {
		if _, ok := n.Position(g); ok {
			pr.GPUs[strconv.Itoa(g)] = u
		} else {
			pr.PendingUnits += u
		}
	}
	return pr
}

// cards lists the indexes of the cards the pod holds memory on, sorted.
func (p *PodReport) cards() []int {
	out := make([]int, 0, len(p.GPUs))
	for k := range p.GPUs {
		if g, err := strconv.Atoi(k); err == nil {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out
}

// memoryLimitOf reads the node's memory limit mode from its inventory annotation: the cards'
// common mode, the distinct modes joined by "," when they differ, "" when none says.
func memoryLimitOf(node *v1.Node, names *contract.Names) string {
	gpus, err := contract.DecodeGPUs(node.Annotations[names.NodeGPUsAnnotation])
	if err != nil {
		return ""
	}
	var modes []string
	for _, g := range gpus {
		if g.MemoryLimit != "" && !slices.Contains(modes, g.MemoryLimit) {
			modes = append(modes, g.MemoryLimit)
		}
	}
	return strings.Join(modes, ",")
}

// nodeAddress is the node's InternalIP, else its first address.
func nodeAddress(node *v1.Node) string {
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	if len(node.Status.Addresses) > 0 {
		return node.Status.Addresses[0].Address
	}
	return ""
}
