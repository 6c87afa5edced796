package deviceplugin

import (
	"fmt"
	"math"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// A card is advertised by what a container can get of it: its total less what the driver keeps
// for itself (NVML's nvmlDeviceGetMemoryInfo_v2 reserved, about 450 MiB on a T4) and what the
// operator holds back (WithReserveMemory). Counting the total instead would let the pod that
// takes the last unit run out of memory inside its own limit.

// sizeGPU is card d, healthy, with its usable memory in units of names after the driver's
// reserve and reserve bytes of the operator's. A card the reserves leave nothing of is an
// error: the operator's reserve is wrong for it.
func sizeGPU(d nvml.Device, names *contract.Names, reserve uint64) (gpu, error) {
	usable := d.UsableBytes(reserve)
	if usable == 0 {
		return gpu{}, fmt.Errorf("%w: GPU %d (%s): the driver's reserve (%d MiB) and --reserve-memory (%d MiB) leave nothing of its %d MiB",
			ErrInvalidConfig, d.Index, d.UUID, d.ReservedBytes>>20, reserve>>20, d.MemoryBytes>>20)
	}
	g := gpu{Device: d, reserved: d.ReservedBytes + reserve, usable: usable, healthy: true}
	g.units = names.UnitsOf(g.usable)
	if err := names.CheckDeviceCount(g.units); err != nil {
		return gpu{}, fmt.Errorf("GPU %d (%s): %w", d.Index, d.UUID, err)
	}
	return g, nil
}

// unknownReserves lists the indexes of the cards whose driver reserve NVML cannot report: they
// are sized from their total, and a container may get less than their units promise.
func (inv *inventory) unknownReserves() []int {
	var out []int
	for _, g := range inv.gpus {
		if !g.ReservedKnown {
			out = append(out, g.Index)
		}
	}
	return out
}

// logSizes logs each card's memory and units at start, and warns when NVML cannot say what
// the driver reserves of some cards (an older driver): those are sized from their total.
func (inv *inventory) logSizes(logger klog.Logger, reserve int64) {
	for _, g := range inv.gpus {
		logger.Info("GPU sized", "gpu", g.Index, "uuid", g.UUID, "totalMiB", g.MemoryBytes>>20, "driverReservedMiB", g.ReservedBytes>>20,
			"driverReserveKnown", g.ReservedKnown, "reserveMemoryMiB", reserve>>20, "usableMiB", g.usable>>20, "units", g.units)
	}
	if unknown := inv.unknownReserves(); len(unknown) > 0 {
		logger.Info("Warning: NVML cannot say what the driver reserves of these GPUs (no nvmlDeviceGetMemoryInfo_v2): "+
			"they are sized from their total, and a container may get less than its units; set --reserve-memory to hold some back",
			"gpus", unknown)
	}
}

// bytesOf is a card's memory figure as the contract writes it (int64: a card's bytes fit).
func bytesOf(b uint64) int64 {
	return int64(min(b, math.MaxInt64))
}
