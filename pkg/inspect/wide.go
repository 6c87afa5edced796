package inspect

import (
	"fmt"
	"io"
	"strconv"
)

// PrintWide prints the default table, then one row per card with its model, UUID and health,
// then the cluster line.
func PrintWide(out io.Writer, r *Report) error {
	w := newTable(out)
	cards, pending := maxCards(r), anyPending(r)
	if err := writeRow(w, tableHeader(cards, pending, r.Unit)...); err != nil {
		return err
	}
	for i := range r.Nodes {
		if err := writeRow(w, tableRow(&r.Nodes[i], cards, pending)...); err != nil {
			return err
		}
	}
	if err := writeRow(w); err != nil {
		return err
	}
	if err := printCards(w, r.Nodes, r.Unit); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return printClusterLine(out, r)
}

// printCards writes the card table. The caller separates it from the node table by an empty
// line, which ends tabwriter's column blocks, so each table keeps its own column widths.
func printCards(w io.Writer, nodes []NodeReport, unit string) error {
	err := writeRow(w, "NODE", "GPU", "MODEL", "UUID", "HEALTH", "ALLOCATED/TOTAL("+unit+")", "INVENTORY")
	for i := 0; i < len(nodes) && err == nil; i++ {
		n := &nodes[i]
		for _, g := range n.GPUs {
			err = writeRow(w, n.Name, strconv.Itoa(g.Index), orDash(g.Model), orDash(g.UUID), health(g.Healthy),
				fraction(g.Allocated, g.Total), string(n.Inventory))
			if err != nil {
				break
			}
		}
	}
	return err
}

func health(ok bool) string {
	if ok {
		return "Healthy"
	}
	return "Unhealthy"
}
