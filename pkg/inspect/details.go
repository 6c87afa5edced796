package inspect

import (
	"fmt"
	"io"
	"strconv"
)

// PrintDetails prints, per node, its pods with their units on each card (and pending units when
// the node has any), the node's allocated/total, then the cluster line. wide adds what joins
// each multi-card pod's cards and each node's card table (model, UUID, health, NUMA node).
func PrintDetails(out io.Writer, r *Report, wide bool) error {
	for i := range r.Nodes {
		if i > 0 {
			if _, err := io.WriteString(out, separator); err != nil {
				return err
			}
		}
		if err := printNodeDetails(out, &r.Nodes[i], r.Unit, wide, anyDRA(r)); err != nil {
			return fmt.Errorf("node %s: %w", r.Nodes[i].Name, err)
		}
	}
	return printClusterLine(out, r)
}

// printNodeDetails prints one node's details; mode adds the MODE column to its card table
// (wide only).
func printNodeDetails(out io.Writer, n *NodeReport, unit string, wide, mode bool) error {
	w := newTable(out)
	t := &rows{w: w}
	t.row("NAME:", n.Name)
	t.row("IPADDRESS:", orDash(n.Address))
	t.row()
	writePodTable(t, n, wide)
	t.row()
	if wide {
		writeCards(t, []NodeReport{*n}, unit, mode)
		t.row()
	}
	t.row("Allocated/Total GPU Memory("+unit+"):",
		fraction(n.Allocated, n.Total)+" ("+strconv.FormatInt(n.Percent(), 10)+"%)")
	return flush(w, t.err)
}

// writePodTable writes one row per pod with a column per card of the node and a PENDING
// column when the node has pending units, then a row with each card's allocated/total. wide
// adds a CARDS column: what joins a multi-card pod's cards.
func writePodTable(t *rows, n *NodeReport, wide bool) {
	pending := n.PendingUnits > 0
	h := []string{"NAME", "NAMESPACE"}
	for _, g := range n.GPUs {
		h = append(h, "GPU"+strconv.Itoa(g.Index)+"(Allocated)")
	}
	if pending {
		h = append(h, "PENDING(Allocated)")
	}
	if wide {
		h = append(h, "CARDS")
	}
	t.row(h...)
	for i := range n.Pods {
		row := podRow(&n.Pods[i], n, pending)
		if wide {
			row = append(row, orDash(n.Pods[i].Links))
		}
		t.row(row...)
	}
	t.row(cardTotalsRow(n, pending)...)
}

func podRow(p *PodReport, n *NodeReport, pending bool) []string {
	row := []string{p.Name, p.Namespace}
	for _, g := range n.GPUs {
		row = append(row, strconv.FormatInt(p.GPUs[strconv.Itoa(g.Index)], 10))
	}
	if pending {
		row = append(row, strconv.FormatInt(p.PendingUnits, 10))
	}
	return row
}

// cardTotalsRow is the last row of a node's pod table: allocated/total of each card.
func cardTotalsRow(n *NodeReport, pending bool) []string {
	row := []string{"Allocated/Total", ""}
	for _, g := range n.GPUs {
		row = append(row, cardCell(&g))
	}
	if pending {
		row = append(row, strconv.FormatInt(n.PendingUnits, 10))
	}
	return row
}
