package capitree

import (
	"strings"
	"unicode/utf8"
)

// The columns of clusterctl v1.13.6's describe cluster, in order.
var header = row{"NAME", "REPLICAS", "AVAILABLE", "READY", "UP TO DATE", "STATUS", "REASON", "SINCE", "MESSAGE"}

// row is one line of the table: a cell per column of header.
type row [9]string

// layout writes rows under the header as clusterctl's table shows them: each column but the last
// is as wide as needed for two blanks after its longest cell and one after its heading, cells
// start at their column's left edge, and the blanks that end a line are dropped.
func layout(rows []row) string {
	var width [len(header)]int
	for i, h := range header {
		width[i] = utf8.RuneCountInString(h) + 1
	}
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], utf8.RuneCountInString(cell)+2)
		}
	}
	var b strings.Builder
	for _, r := range append([]row{header}, rows...) {
		var line strings.Builder
		for i, cell := range r {
			line.WriteString(cell)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell)))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	return b.String()
}
