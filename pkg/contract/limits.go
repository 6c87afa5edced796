package contract

// Sanity bounds on what pods and nodes may declare. Anything beyond them is a mistake or an
// attack, refused with a clear error before it costs memory or time: a 20,000-entry model list
// once made one filter over 100 nodes take 30 s, and a node claiming 10^9 GPUs grew the
// extender by half a gigabyte.
const (
	// MaxModelEntries bounds the '|'-separated entries of a pod's GPU model annotation.
	MaxModelEntries = 32
	// MaxModelEntryLength bounds one entry of the model annotation, in bytes.
	MaxModelEntryLength = 64
	// MaxGPUsPerNode bounds the cards of one node, from its annotation or its gpu-count.
	MaxGPUsPerNode = 64
	// MaxUnitsPerGPU bounds one card's memory in units: 1 TiB with the smallest unit, 1Mi.
	MaxUnitsPerGPU = 1 << 20
	// MaxInventoryBytes bounds the node GPU annotation's length (64 cards take about 12 KiB).
	MaxInventoryBytes = 64 << 10
	// MaxGPUFieldLength bounds a card's UUID and model strings in the node annotation.
	MaxGPUFieldLength = 256
	// MaxLinksLength bounds a card's links (GPU.Links): 64 tokens of at most 4 bytes and
	// their spaces. 64 cards' links take about 20 KiB of the inventory's MaxInventoryBytes.
	MaxLinksLength = 320
	// MaxNUMANode bounds a card's NUMA node (Linux allows 1,024).
	MaxNUMANode = 1023
)
