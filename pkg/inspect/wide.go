package inspect

import (
	"io"
	"strconv"
)

// PrintWide prints the default table, then one row per card with its model, UUID, health,
// memory (total, reserved, usable), NUMA node and the node's memory limit mode, then the
// cluster line.
func PrintWide(out io.Writer, r *Report) error {
	w := newTable(out)
	t := &rows{w: w}
	writeNodeTable(t, r)
	t.row() // an empty line ends tabwriter's column blocks: each table keeps its own widths
	writeCards(t, r.Nodes, r.Unit)
	if err := flush(w, t.err); err != nil {
		return err
	}
	return printClusterLine(out, r)
}

// writeCards writes the card table of nodes.
func writeCards(t *rows, nodes []NodeReport, unit string) {
	t.row("NODE", "GPU", "MODEL", "UUID", "HEALTH", "ALLOCATED/TOTAL("+unit+")", "MEMORY", "RESERVED", "USABLE",
		"INVENTORY", "MEMORY-LIMIT", "NUMA")
	for i := range nodes {
		n := &nodes[i]
		for _, g := range n.GPUs {
			known := g.MemoryBytes > 0 // plugins older than the figures publish none
			t.row(n.Name, strconv.Itoa(g.Index), orDash(g.Model), orDash(g.UUID), health(g.Healthy),
				fraction(g.Allocated, g.Total), mibCell(known, g.MemoryBytes), mibCell(known, g.ReservedBytes),
				mibCell(known, g.UsableBytes), string(n.Inventory), orDash(n.MemoryLimit), numaCell(g.NUMA))
		}
	}
}

// mibCell renders a memory figure in whole MiB ("15360Mi"), "-" when not known.
func mibCell(known bool, b int64) string {
	if !known {
		return "-"
	}
	return strconv.FormatInt(b>>20, 10) + "Mi"
}

func health(ok bool) string {
	if ok {
		return "Healthy"
	}
	return "Unhealthy"
}
