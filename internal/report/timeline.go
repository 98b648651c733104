package report

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Timeline is a run laid out in time: a row of phases, then a row per pool with the stages it
// passed and, when it failed, the stage it could not pass (from timings.json and the verdict's
// failures).
type Timeline struct {
	Start, End time.Time
	Rows       []Row
}

// Row is the phases (Pool empty) or one pool.
type Row struct {
	Name string
	Pool string
	Bars []Bar
}

// Bar is one phase or stage.
type Bar struct {
	Label      string
	Start, End time.Time
	// Status is ok, failed (a phase that failed or ran out), skipped, declined, or failure (the
	// stage a pool could not pass; a failure outside any pool).
	Status string
	// Title says it in words (a tooltip).
	Title string
}

// Failed reports whether the bar marks a failure.
func (b Bar) Failed() bool {
	return b.Status == "failed" || b.Status == "failure" || b.Status == "declined"
}

// BuildTimeline lays out t and the failures.
func BuildTimeline(t budget.Timings, failures []verdict.Failure) Timeline {
	tl := Timeline{}
	// A phase that starts before the one before it ended (the pools phase, with the first
	// conformance cluster up) is drawn on a row of its own, below, so neither hides the other.
	phases := []Row{{Name: "phases"}}
	var poolsStart time.Time
	for _, p := range t.Phases {
		phases = placePhase(phases, phaseBar(p))
		tl.widen(p.Start, p.End)
		if p.Name == "pools" && (poolsStart.IsZero() || p.Start.Before(poolsStart)) {
			poolsStart = p.Start
		}
	}
	byPool := map[string][]budget.StageTiming{}
	for _, s := range t.Stages {
		byPool[s.Pool] = append(byPool[s.Pool], s)
		tl.widen(s.Start, s.End)
	}
	for _, f := range failures {
		if f.Pool != "" {
			if _, ok := byPool[f.Pool]; !ok {
				byPool[f.Pool] = nil
			}
		}
	}
	names := make([]string, 0, len(byPool))
	for p := range byPool {
		names = append(names, p)
	}
	sort.Strings(names)
	var rows []Row
	for _, pool := range names {
		rows = append(rows, tl.poolRow(pool, byPool[pool], poolsStart, failures))
	}
	for _, f := range failures {
		if f.Pool == "" && !f.At.IsZero() {
			phases[0].Bars = append(phases[0].Bars, Bar{Label: string(f.Class), Start: f.At, End: f.At, Status: "failure", Title: f.Line()})
			tl.widen(f.At, f.At)
		}
	}
	tl.Rows = append(phases, rows...)
	return tl
}

// widen stretches the timeline to hold a to b (a zero a does not move its start).
func (tl *Timeline) widen(a, b time.Time) {
	if !a.IsZero() && (tl.Start.IsZero() || a.Before(tl.Start)) {
		tl.Start = a
	}
	if b.After(tl.End) {
		tl.End = b
	}
}

// phaseBar is phase p's bar: its status from its outcome, and a title with its time spent,
// ceiling and error or note.
func phaseBar(p budget.PhaseTiming) Bar {
	status := "ok"
	switch p.Outcome {
	case budget.OutcomeFailed, budget.OutcomeDeadline:
		status = "failed"
	case budget.OutcomeSkipped:
		status = "skipped"
	case budget.OutcomeDeclined:
		status = "declined"
	}
	title := fmt.Sprintf("phase %s %s in %s", p.Label(), p.Outcome, secs(p.Spent.D()))
	if p.Planned > 0 {
		title += fmt.Sprintf(" (ceiling %s)", secs(p.Planned.D()))
	}
	if why := firstNonEmpty(p.Error, p.Note); why != "" {
		title += ": " + why
	}
	return Bar{Label: p.Label(), Start: p.Start, End: p.End, Status: status, Title: title}
}

// poolRow is pool's row: the stages it passed in the order they ended, then each of its
// failures drawn from the end of the last stage (or the pools phase's start) to when it was
// seen; the timeline widens to hold the failures.
func (tl *Timeline) poolRow(pool string, stages []budget.StageTiming, poolsStart time.Time, failures []verdict.Failure) Row {
	sort.SliceStable(stages, func(i, j int) bool { return stages[i].End.Before(stages[j].End) })
	row := Row{Name: "pool " + pool, Pool: pool}
	last := poolsStart
	for _, s := range stages {
		row.Bars = append(row.Bars, Bar{Label: s.Stage, Start: s.Start, End: s.End, Status: "ok",
			Title: fmt.Sprintf("pool %s passed %s in %s", pool, s.Stage, secs(s.Spent.D()))})
		if s.End.After(last) {
			last = s.End
		}
	}
	for _, f := range failures {
		if f.Pool != pool || f.At.IsZero() {
			continue
		}
		start := last
		if start.IsZero() || !start.Before(f.At) {
			start = f.At.Add(-time.Second)
		}
		row.Bars = append(row.Bars, Bar{Label: verdict.Label(f.Class, f.Stage), Start: start, End: f.At, Status: "failure", Title: f.Line()})
		tl.widen(start, f.At)
	}
	return row
}

// placePhase puts b on the first phases row whose bars all ended by its start, or on a new row
// "phases (overlapping)".
func placePhase(rows []Row, b Bar) []Row {
	for i, r := range rows {
		if n := len(r.Bars); n == 0 || !b.Start.Before(r.Bars[n-1].End) {
			rows[i].Bars = append(rows[i].Bars, b)
			return rows
		}
	}
	return append(rows, Row{Name: "phases (overlapping)", Bars: []Bar{b}})
}

// Mermaid is the timeline as a Mermaid gantt chart (GitHub draws it in step summaries and
// Markdown): a section of phases, a section per pool, failures marked crit.
func (tl Timeline) Mermaid(title string) string {
	var b strings.Builder
	b.WriteString("```mermaid\ngantt\n")
	fmt.Fprintf(&b, "    title %s\n", mermaidText(title))
	b.WriteString("    dateFormat x\n    axisFormat %H:%M:%S\n")
	id := 0
	for _, r := range tl.Rows {
		if len(r.Bars) == 0 {
			continue
		}
		fmt.Fprintf(&b, "    section %s\n", mermaidText(r.Name))
		for _, bar := range r.Bars {
			id++
			var tags []string
			switch {
			case bar.Failed():
				tags = append(tags, "crit")
			case bar.Status == "skipped":
				tags = append(tags, "done")
			}
			end := bar.End
			if !end.After(bar.Start) {
				end = bar.Start.Add(time.Millisecond)
			}
			label := bar.Label
			if d := bar.End.Sub(bar.Start); d > 0 {
				label += " " + secs(d)
			}
			fmt.Fprintf(&b, "    %s :%s, %d, %d\n", mermaidText(label), strings.Join(append(tags, fmt.Sprintf("t%d", id)), ", "),
				bar.Start.UnixMilli(), end.UnixMilli())
		}
	}
	b.WriteString("```\n")
	return b.String()
}

// mermaidText keeps what a gantt line cannot hold out of a name (its separators and comments).
func mermaidText(s string) string {
	return strings.NewReplacer(":", " ", "#", " ", ";", " ", "\n", " ", "%%", " ").Replace(s)
}
