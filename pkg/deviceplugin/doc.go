// Package deviceplugin is gpushare's kubelet device plugin: it advertises GPU memory as one
// fake device per unit (contract.Names.Resource), publishes the node's GPU inventory, and in
// Allocate hands every container the card(s) the extender chose for its pod.
//
// The design of Allocate (which pod is kubelet admitting?) is in docs/deviceplugin.md.
// NVML is reached only through the nvml subpackage.
package deviceplugin
