// Package contract holds what the extender, the device plugin, the inspect CLI and users' pod
// specs agree on: resource names, annotation keys, container env names, the node GPU inventory
// annotation, the placement annotation and the parsing of a pod's gpu-mem request.
//
// Defaults are those of Alibaba's gpushare so that existing pod specs and tools keep working;
// every name can be changed through Names, and all three programs must be configured alike.
// docs/contract.md is the human-readable form of this package.
package contract
