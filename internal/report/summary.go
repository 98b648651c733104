package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
)

// SummaryInput is what summary.md shows.
type SummaryInput struct {
	Verdict  verdict.Verdict
	Timings  budget.Timings
	Manifest []diag.Entry
	Repro    Repro
	// Baseline, when given, is compared stage by stage with this run.
	Baseline *Baseline
	// LinkBase prefixes every link into the artifacts ("" keeps them relative to the folder,
	// where summary.md itself lies).
	LinkBase string
	// Trees are the Cluster API object trees the run wrote (ReadTrees): the tenant cluster's,
	// and each failed pool's.
	Trees []Tree
}

// WriteSummary writes summary.md, fit for $GITHUB_STEP_SUMMARY: the verdict, a Mermaid gantt of
// the phases and each pool's stages (failures marked), the failures with links to their evidence, each pool's stage timeline, the budget planned against spent per
// phase, the diagnostics, and the comparison with a baseline when one is given.
func WriteSummary(w io.Writer, in SummaryInput) error {
	b := &strings.Builder{}
	writeHeadline(b, in)
	writeClusters(b, in)
	writeFailures(b, in)
	writeMarks(b, in)
	writeSkipped(b, in)
	writeJoinStages(b, in)
	writeBudget(b, in)
	writeTrees(b, in)
	writeDiagnostics(b, in)
	if in.Baseline != nil {
		writeComparison(b, in)
	}
	if in.Repro.Command != "" {
		fmt.Fprintf(b, "### Reproduce\n\n```sh\n%s\n```\n", in.Repro.Command)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHeadline writes the lane's title with its result and exit code, the timeline chart, the
// run's facts (run id, commit, start to end), the reason and how many checks were skipped.
func writeHeadline(b *strings.Builder, in SummaryInput) {
	v := in.Verdict
	fmt.Fprintf(b, "## Lane %s: %s (exit %d)\n\n", v.Lane, strings.ToUpper(string(v.Result)), v.ExitCode)
	if tl := BuildTimeline(in.Timings, v.Failures); len(tl.Rows) > 0 && !tl.Start.IsZero() {
		b.WriteString(tl.Mermaid(fmt.Sprintf("lane %s %s, run %s", v.Lane, v.Result, orUnknown(v.RunID))))
		b.WriteString("\n")
	}
	var facts []string
	if v.RunID != "" {
		facts = append(facts, "run "+code(v.RunID))
	}
	if in.Repro.Commit != "" {
		c := in.Repro.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		facts = append(facts, "commit "+code(c))
	}
	if !v.Start.IsZero() && !v.End.IsZero() {
		facts = append(facts, fmt.Sprintf("%s to %s (%s)", v.Start.UTC().Format(time.RFC3339), v.End.UTC().Format(time.RFC3339), v.End.Sub(v.Start).Round(time.Second)))
	}
	if len(facts) > 0 {
		b.WriteString(strings.Join(facts, " · ") + "\n\n")
	}
	if v.Reason != "" {
		fmt.Fprintf(b, "**%s**\n\n", cell(v.Reason))
	}
	if n := len(v.Skipped); n > 0 {
		fmt.Fprintf(b, "%d check(s) skipped, each with its reason ([below](#skipped-checks)).\n\n", n)
	}
}

// writeClusters writes the table of conformance clusters with their versions, pools and
// results, when the run had any.
func writeClusters(b *strings.Builder, in SummaryInput) {
	if len(in.Verdict.Clusters) == 0 {
		return
	}
	b.WriteString("### Conformance clusters\n\n| cluster | Kubernetes | pools | result |\n| --- | --- | --- | --- |\n")
	for _, c := range in.Verdict.Clusters {
		result := string(c.Result)
		if c.Failures > 0 {
			result += fmt.Sprintf(" (%d failure(s))", c.Failures)
		}
		fmt.Fprintf(b, "| %s | %s (%s) | %s | %s |\n", cell(c.Name), code(c.Version), code(c.Patch), cell(strings.Join(c.Pools, ", ")), result)
	}
	b.WriteString("\n")
}

// writeFailures writes the table of failures with their pool, class, stage, weight, message
// and links to their evidence, when there are any.
func writeFailures(b *strings.Builder, in SummaryInput) {
	if len(in.Verdict.Failures) == 0 {
		return
	}
	b.WriteString("### Failures\n\n| pool | class | stage | hard/soft | message | evidence |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, f := range in.Verdict.Failures {
		hs := "hard"
		if f.Soft {
			hs = "soft"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", cell(firstNonEmpty(f.Pool, "-")), code(string(f.Class)), cell(firstNonEmpty(f.Stage, "-")),
			hs, cell(clip(f.Message, 300)), links(in.LinkBase, f.Evidence, 4))
	}
	b.WriteString("\n")
}

// writeSkipped writes the table of skipped checks with their reasons, when there are any.
func writeSkipped(b *strings.Builder, in SummaryInput) {
	if len(in.Verdict.Skipped) == 0 {
		return
	}
	b.WriteString("### Skipped checks\n\n| pool | spec | check | reason |\n| --- | --- | --- | --- |\n")
	for _, s := range in.Verdict.Skipped {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", cell(firstNonEmpty(s.Pool, "-")), cell(s.Spec), cell(s.Check), cell(clip(s.Reason, 300)))
	}
	b.WriteString("\n")
}

// writeJoinStages writes each pool's join stages with the seconds each took, when the timings
// have any.
func writeJoinStages(b *strings.Builder, in SummaryInput) {
	pools := stageTimeline(in.Timings)
	if len(pools) == 0 {
		return
	}
	b.WriteString("### Pools: join stages (seconds from the stage before)\n\n")
	for _, p := range pools {
		fmt.Fprintf(b, "- **%s**: %s\n", cell(p.pool), p.line)
	}
	b.WriteString("\n")
}

// writeBudget writes the table of the lane's phases, each with its ceiling, time spent, share
// of the ceiling and outcome, when the timings have any.
func writeBudget(b *strings.Builder, in SummaryInput) {
	if len(in.Timings.Phases) == 0 {
		return
	}
	b.WriteString("### Budget: planned against spent\n\n| phase | ceiling | spent | share | outcome |\n| --- | ---: | ---: | ---: | --- |\n")
	for _, p := range in.Timings.Phases {
		share := "-"
		if p.Planned > 0 {
			share = fmt.Sprintf("%.0f%%", 100*p.Spent.D().Seconds()/p.Planned.D().Seconds())
		}
		outcome := string(p.Outcome)
		if p.Error != "" {
			outcome += ": " + clip(p.Error, 120)
		} else if p.Note != "" {
			outcome += ": " + clip(p.Note, 120)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", cell(p.Label()), secs(p.Planned.D()), secs(p.Spent.D()), share, cell(outcome))
	}
	b.WriteString("\n")
}

func writeDiagnostics(b *strings.Builder, in SummaryInput) {
	var notable []diag.Entry
	counts := map[diag.Status]int{}
	for _, e := range in.Manifest {
		counts[e.Status]++
		if e.Status != diag.Complete || !strings.HasPrefix(e.Name, "stream ") {
			notable = append(notable, e)
		}
	}
	if len(in.Manifest) == 0 && len(in.Timings.Declined) == 0 {
		return
	}
	fmt.Fprintf(b, "### Diagnostics\n\n%d complete, %d truncated, %d failed, %d declined ([manifest.json](%s))\n\n",
		counts[diag.Complete], counts[diag.Truncated], counts[diag.Failed], counts[diag.Declined], link(in.LinkBase, "manifest.json"))
	if len(notable) > 0 {
		b.WriteString("| collector | scope | status | took | bytes | files / why |\n| --- | --- | --- | ---: | ---: | --- |\n")
		for _, e := range notable {
			what := links(in.LinkBase, e.Paths, 3)
			if e.Error != "" {
				what = cell(clip(e.Error, 160))
				if len(e.Paths) > 0 {
					what += " " + links(in.LinkBase, e.Paths, 3)
				}
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %s |\n", cell(e.Name), cell(e.Scope), e.Status, secs(e.Duration.D()), e.Bytes, what)
		}
		b.WriteString("\n")
	}
	for _, d := range in.Timings.Declined {
		fmt.Fprintf(b, "- declined: %s: %s\n", cell(d.What), cell(d.Reason))
	}
	if len(in.Timings.Declined) > 0 {
		b.WriteString("\n")
	}
}

func writeComparison(b *strings.Builder, in SummaryInput) {
	base := in.Baseline
	fmt.Fprintf(b, "### Compared with the green baseline (run %s, commit %s)\n\n", code(orUnknown(base.RunID)), code(short(base.Commit)))
	deltas := Compare(*base, in.Timings)
	if len(deltas) == 0 {
		b.WriteString("The baseline holds no stage timings.\n\n")
		return
	}
	b.WriteString("| pool | stage | baseline | this run | |\n| --- | --- | ---: | ---: | --- |\n")
	for _, d := range deltas {
		now, flag := "not reached", "**stopped before this**"
		if d.Reached {
			now, flag = fmt.Sprintf("%.1fs", d.Current), ""
			if d.Slower {
				flag = fmt.Sprintf("**%.1fx slower**", d.Current/max(d.Baseline, 0.001))
			}
		}
		fmt.Fprintf(b, "| %s | %s | %.1fs | %s | %s |\n", cell(d.Pool), cell(d.Stage), d.Baseline, now, flag)
	}
	b.WriteString("\n")
	if len(base.Consoles) > 0 {
		b.WriteString("Baseline consoles: ")
		var parts []string
		for _, c := range base.Consoles {
			parts = append(parts, fmt.Sprintf("%s first line %.1fs after launcher start, %d lines over %.1fs", cell(c.VMI), c.FirstLine, c.Lines, c.Span))
		}
		b.WriteString(strings.Join(parts, "; ") + "\n\n")
	}
}

type poolLine struct{ pool, line string }

// stageTimeline is each pool's stages in the order reached, with the seconds each took.
func stageTimeline(t budget.Timings) []poolLine {
	by := map[string][]budget.StageTiming{}
	for _, s := range t.Stages {
		by[s.Pool] = append(by[s.Pool], s)
	}
	names := make([]string, 0, len(by))
	for p := range by {
		names = append(names, p)
	}
	sort.Strings(names)
	var out []poolLine
	for _, p := range names {
		ss := by[p]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].End.Before(ss[j].End) })
		var parts []string
		var total time.Duration
		for _, s := range ss {
			parts = append(parts, fmt.Sprintf("%s %s", s.Stage, secs(s.Spent.D())))
			total += s.Spent.D()
		}
		out = append(out, poolLine{p, strings.Join(parts, " → ") + fmt.Sprintf(" (total %s)", secs(total))})
	}
	return out
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func code(s string) string { return "`" + strings.ReplaceAll(s, "`", "'") + "`" }

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r", ""), "\n", " ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return orUnknown(c)
}

func link(base, rel string) string {
	if base == "" {
		return rel
	}
	return strings.TrimRight(base, "/") + "/" + rel
}

func links(base string, paths []string, most int) string {
	var out []string
	for i, p := range paths {
		if i == most {
			out = append(out, fmt.Sprintf("and %d more", len(paths)-most))
			break
		}
		out = append(out, fmt.Sprintf("[%s](%s)", cell(p), link(base, p)))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}
