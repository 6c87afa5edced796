package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// ErrInvalidInventory is wrapped by errors about the node GPU annotation.
var ErrInvalidInventory = errors.New("invalid node GPU annotation")

// GPU is one card as the device plugin reports it in the node annotation.
type GPU struct {
	// Index is the NVML index.
	Index int `json:"index"`
	// UUID is the NVML UUID.
	UUID string `json:"uuid"`
	// Model is the NVML product name.
	Model string `json:"model"`
	// Units is the card's usable memory (UsableBytes) in units, rounded down.
	Units int64 `json:"units"`
	// MemoryBytes is the card's total memory as NVML reports it; absent (0) from plugins older
	// than the field.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// ReservedBytes is the part of MemoryBytes no container can get: what the driver keeps for
	// itself (NVML's nvmlDeviceGetMemoryInfo_v2 reserved; 0 where the driver does not say) plus
	// what the node's operator holds back (share-plugin --reserve-memory). Absent: 0.
	ReservedBytes int64 `json:"reservedBytes,omitempty"`
	// UsableBytes is MemoryBytes - ReservedBytes, what Units count; absent from older plugins.
	UsableBytes int64 `json:"usableBytes,omitempty"`
	// Healthy is false after a critical XID, until the plugin restarts (NVML reports no
	// recovery: docs/operations.md#gpu-health).
	Healthy bool `json:"healthy"`
	// MemoryLimit says how the node's plugin holds containers on this card to the memory they
	// asked: MemoryLimitHAMiCore, MemoryLimitNone, MemoryLimitUnavailable (asked for, but the
	// library is missing or unusable: no limits). Empty from plugins older than the field.
	MemoryLimit string `json:"memoryLimit,omitempty"`
	// NUMA is the NUMA node of the card's PCIe device (NVML, else sysfs); nil: unknown.
	NUMA *int `json:"numa,omitempty"`
	// Links is the card's row of the node's link matrix (topology.go): one token per card in
	// index order, "X" for itself. Empty: unknown (TopologyOf).
	Links string `json:"links,omitempty"`
	// TopologyVersion is the version of Links' grammar (TopologyVersion); 0 without Links.
	TopologyVersion int `json:"topologyVersion,omitempty"`
}

// Values of GPU.MemoryLimit.
const (
	// MemoryLimitHAMiCore: every container is held to its ask by HAMi-core.
	MemoryLimitHAMiCore = "hami-core"
	// MemoryLimitNone: the node shares its cards without limits (the operator chose so).
	MemoryLimitNone = "none"
	// MemoryLimitUnavailable: limits were asked for, but the plugin could not provide them.
	MemoryLimitUnavailable = "unavailable"
)

// EncodeGPUs renders a node's inventory as the annotation value, sorted by index.
func EncodeGPUs(gpus []GPU) (string, error) {
	sorted := append([]GPU(nil), gpus...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	raw, err := json.Marshal(sorted)
	if err != nil {
		return "", fmt.Errorf("encode GPUs: %w", err)
	}
	return string(raw), nil
}

// DecodeGPUs parses and checks the annotation value; the result is sorted by index.
// The annotation, its cards, their units and strings must stay within MaxInventoryBytes,
// MaxGPUsPerNode, MaxUnitsPerGPU and MaxGPUFieldLength. A card is named once: an index or a
// UUID under two entries is refused (one card counted twice would be offered twice).
func DecodeGPUs(raw string) ([]GPU, error) {
	if len(raw) > MaxInventoryBytes {
		return nil, fmt.Errorf("%w: %d bytes long, at most %d are accepted", ErrInvalidInventory, len(raw), MaxInventoryBytes)
	}
	var gpus []GPU
	if err := json.Unmarshal([]byte(raw), &gpus); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInventory, err)
	}
	if len(gpus) > MaxGPUsPerNode {
		return nil, fmt.Errorf("%w: %d GPUs, at most %d per node are accepted", ErrInvalidInventory, len(gpus), MaxGPUsPerNode)
	}
	seen := map[int]bool{}
	uuids := make(map[string]int, len(gpus))
	for _, g := range gpus {
		if err := checkGPU(g, uuids); err != nil {
			return nil, err
		}
		switch {
		case g.Index < 0 || g.Units < 0 || seen[g.Index]:
			return nil, fmt.Errorf("%w: GPU index %d with %d units (negative or repeated)", ErrInvalidInventory, g.Index, g.Units)
		case g.Units > MaxUnitsPerGPU:
			return nil, fmt.Errorf("%w: GPU %d has %d units, at most %d are accepted", ErrInvalidInventory, g.Index, g.Units, MaxUnitsPerGPU)
		case len(g.UUID) > MaxGPUFieldLength || len(g.Model) > MaxGPUFieldLength || len(g.MemoryLimit) > MaxGPUFieldLength:
			return nil, fmt.Errorf("%w: GPU %d's UUID, model or memory limit is longer than %d bytes", ErrInvalidInventory, g.Index, MaxGPUFieldLength)
		case len(g.Links) > MaxLinksLength:
			return nil, fmt.Errorf("%w: GPU %d's links are longer than %d bytes", ErrInvalidInventory, g.Index, MaxLinksLength)
		case g.NUMA != nil && (*g.NUMA < 0 || *g.NUMA > MaxNUMANode):
			return nil, fmt.Errorf("%w: GPU %d's NUMA node %d is not between 0 and %d", ErrInvalidInventory, g.Index, *g.NUMA, MaxNUMANode)
		}
		seen[g.Index] = true
	}
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	return gpus, nil
}

// checkGPU refuses a card whose memory figures are negative or whose UUID an earlier card of
// the annotation has (uuids: UUID → index, filled here). Cards without a UUID are not
// compared.
func checkGPU(g GPU, uuids map[string]int) error {
	if g.MemoryBytes < 0 || g.ReservedBytes < 0 || g.UsableBytes < 0 {
		return fmt.Errorf("%w: GPU %d has negative memory (total %d, reserved %d, usable %d bytes)", ErrInvalidInventory,
			g.Index, g.MemoryBytes, g.ReservedBytes, g.UsableBytes)
	}
	if g.UUID == "" {
		return nil
	}
	if other, dup := uuids[g.UUID]; dup {
		return fmt.Errorf("%w: GPU %s is listed under indexes %d and %d (one card counted twice)", ErrInvalidInventory,
			g.UUID, other, g.Index)
	}
	uuids[g.UUID] = g.Index
	return nil
}
