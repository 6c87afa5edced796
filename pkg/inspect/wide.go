package inspect

import (
	"io"
	"slices"
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
	writeCards(t, r.Nodes, r.Unit, anyDRA(r))
	if err := flush(w, t.err); err != nil {
		return err
	}
	return printClusterLine(out, r)
}

// writeCards writes the card table of nodes; mode adds a MODE column (dra or device-plugin),
// wanted only when some node is a DRA node, so that a cluster without DRA sees the table as
// before.
func writeCards(t *rows, nodes []NodeReport, unit string, mode bool) {
	h := []string{"NODE", "GPU", "MODEL", "UUID", "HEALTH", "ALLOCATED/TOTAL(" + unit + ")", "MEMORY", "RESERVED", "USABLE",
		"INVENTORY", "MEMORY-LIMIT", "NUMA"}
	if mode {
		h = append(h, "MODE")
	}
	t.row(h...)
	for i := range nodes {
		n := &nodes[i]
		for _, g := range n.GPUs {
			known := g.MemoryBytes > 0 // plugins older than the figures publish none
			row := []string{n.Name, strconv.Itoa(g.Index), orDash(g.Model), orDash(g.UUID), health(g.Healthy),
				fraction(g.Allocated, g.Total), mibCell(known, g.MemoryBytes), mibCell(known, g.ReservedBytes),
				mibCell(known, g.UsableBytes), string(n.Inventory), orDash(n.MemoryLimit), numaCell(g.NUMA)}
			if mode {
				row = append(row, modeCell(n.Mode))
			}
			t.row(row...)
		}
	}
}

// anyDRA reports whether some node of the report is a DRA node.
func anyDRA(r *Report) bool {
	return slices.ContainsFunc(r.Nodes, func(n NodeReport) bool { return n.Mode == ModeDRA })
}

// modeCell renders a node's mode: "dra", else "device-plugin".
func modeCell(mode string) string {
	if mode == "" {
		return "device-plugin"
	}
	return mode
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
