package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
)

// markRow is one mark of the run (a platform component restarting, going unavailable, coming
// back) as summary.md and report.html list it.
type markRow struct {
	At, From, Subject, What, Detail string
	// Bad marks an outage or a restart (shown red); a recovery is not.
	Bad bool
}

// markRows are t's marks in time order, each with its time from start (the run's start).
func markRows(t budget.Timings, start time.Time) []markRow {
	var out []markRow
	for _, m := range t.Marks {
		r := markRow{At: m.At.UTC().Format("15:04:05"), Subject: m.Subject, What: m.What, Detail: m.Detail,
			Bad: m.What != "available again"}
		if !start.IsZero() {
			r.From = "+" + secs(m.At.Sub(start))
		}
		out = append(out, r)
	}
	return out
}

// writeMarks adds summary.md's "Platform under the pools" table, when the run has marks.
func writeMarks(b *strings.Builder, in SummaryInput) {
	rows := markRows(in.Timings, in.Verdict.Start)
	if len(rows) == 0 {
		return
	}
	b.WriteString("### Platform under the pools\n\n| at | from run start | component | what | detail |\n| --- | ---: | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", r.At, firstNonEmpty(r.From, "-"), cell(r.Subject), cell(r.What), cell(clip(r.Detail, 300)))
	}
	b.WriteString("\n")
}
