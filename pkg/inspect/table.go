package inspect

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
)

// separator ends each node's details and precedes the cluster line.
const separator = "----------------------------------------------------------------------\n"

// newTable returns the tabwriter every table view uses. Flush it when done.
func newTable(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
}

// writeRow writes one table row. Cells are data, never a format string; control characters
// (tabs, newlines, terminal escapes) in them are shown as '?' so they cannot break the table.
func writeRow(w io.Writer, cells ...string) error {
	for i, c := range cells {
		cells[i] = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return '?'
			}
			return r
		}, c)
	}
	_, err := io.WriteString(w, strings.Join(cells, "\t")+"\n")
	return err
}

// rows writes table rows and keeps the first error, so that a view checks once at the end.
type rows struct {
	w   io.Writer
	err error
}

// row writes one row unless an earlier row failed.
func (r *rows) row(cells ...string) {
	if r.err == nil {
		r.err = writeRow(r.w, cells...)
	}
}

// fraction renders "a/b".
func fraction(a, b int64) string {
	return strconv.FormatInt(a, 10) + "/" + strconv.FormatInt(b, 10)
}

// maxCards is the number of card columns: one more than the highest card index of any node, so
// column GPUi always shows the card with NVML index i.
func maxCards(r *Report) int {
	n := 0
	for i := range r.Nodes {
		for _, g := range r.Nodes[i].GPUs {
			n = max(n, g.Index+1)
		}
	}
	return n
}

// gpu returns the node's card with NVML index idx.
func (n *NodeReport) gpu(idx int) (*GPUReport, bool) {
	for i := range n.GPUs {
		if n.GPUs[i].Index == idx {
			return &n.GPUs[i], true
		}
	}
	return nil, false
}

// anyPending reports whether some node holds pending units.
func anyPending(r *Report) bool {
	for i := range r.Nodes {
		if r.Nodes[i].PendingUnits > 0 {
			return true
		}
	}
	return false
}

// PrintTable prints the default view: one row per node with a column per card, a PENDING
// column when some pod holds memory without a placement, the node total, and the cluster line.
func PrintTable(out io.Writer, r *Report) error {
	w := newTable(out)
	t := &rows{w: w}
	writeNodeTable(t, r)
	if err := flush(w, t.err); err != nil {
		return err
	}
	return printClusterLine(out, r)
}

// writeNodeTable writes the header and one row per node.
func writeNodeTable(t *rows, r *Report) {
	cards, pending := maxCards(r), anyPending(r)
	t.row(tableHeader(cards, pending, r.Unit)...)
	for i := range r.Nodes {
		t.row(tableRow(&r.Nodes[i], cards, pending)...)
	}
}

// flush flushes a tabwriter after its rows were written with error err.
func flush(w *tabwriter.Writer, err error) error {
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func tableHeader(cards int, pending bool, unit string) []string {
	h := []string{"NAME", "IPADDRESS"}
	for i := 0; i < cards; i++ {
		h = append(h, "GPU"+strconv.Itoa(i)+"(Allocated/Total)")
	}
	if pending {
		h = append(h, "PENDING(Allocated)")
	}
	return append(h, "GPU Memory("+unit+")")
}

// tableRow renders a node; a node without a card of some column's index shows "-" there.
func tableRow(n *NodeReport, cards int, pending bool) []string {
	row := []string{n.Name, orDash(n.Address)}
	for i := 0; i < cards; i++ {
		if g, ok := n.gpu(i); ok {
			row = append(row, cardCell(g))
		} else {
			row = append(row, "-")
		}
	}
	if pending {
		row = append(row, strconv.FormatInt(n.PendingUnits, 10))
	}
	return append(row, fraction(n.Allocated, n.Total))
}

// cardCell renders a card as "allocated/total", marked when the card is unhealthy so that its
// free memory is not mistaken for usable memory.
func cardCell(g *GPUReport) string {
	if !g.Healthy {
		return fraction(g.Allocated, g.Total) + "(unhealthy)"
	}
	return fraction(g.Allocated, g.Total)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printClusterLine prints the separator and `Allocated/Total GPU Memory In Cluster: X/Y (Z%)`.
func printClusterLine(out io.Writer, r *Report) error {
	_, err := io.WriteString(out, separator+"Allocated/Total GPU Memory In Cluster: "+
		fraction(r.Cluster.Allocated, r.Cluster.Total)+" ("+strconv.FormatInt(r.Cluster.Percent(), 10)+"%)\n")
	return err
}
