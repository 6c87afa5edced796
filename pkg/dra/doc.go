// Package dra is share-plugin's Dynamic Resource Allocation mode (--mode=dra): a DRA kubelet
// plugin, built on k8s.io/dynamic-resource-allocation's kubeletplugin and resourceslice
// packages, that shares GPUs by memory as consumable capacity.
//
// It publishes one ResourceSlice pool for its node with one device per card (cards.go,
// slice.go): attributes (uuid, model, index, the standard PCIe root, PCI bus ID and NUMA node,
// NVLink peers) and two consumable capacities, memory (bytes, in multiples of the unit) and
// cores (percent of the card's SMs), with allowMultipleAllocations, so that kube-scheduler's
// allocator puts several claims on one card and records what each consumed. The order of the
// devices is the order the allocator tries them in (first-fit): order.go.
//
// NodePrepareResources (prepare.go) resolves each claim's allocation on this node's cards
// (allocation.go), holds it to what it consumed through the same enforcement backend as
// device-plugin mode (package enforce: HAMi-core's mounts and env) and hands it over as one
// CDI device per claim (cdi.go); the CDI spec files are also the driver's record of what it
// prepared, read back when it restarts. NodeUnprepareResources removes them. A critical XID
// taints the card NoSchedule instead of hiding it (health.go). A node runs one mode: guard.go
// refuses to start next to the other.
package dra
