package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Line is one run in a line, for the terminal.
func (r Result) Line() string {
	return fmt.Sprintf("  %s: %s in %.1fs, %.0f CPU-s (harness %.1f CPU-s, %.1f%%), peak %.0f MiB (largest %s %.0f MiB), harness %d requests (%.1f per worker), load %s -> %s",
		r.Label, r.Verdict, r.Wall, r.CPU, r.HarnessCPU, 100*r.HarnessShare, r.PeakTreeMiB, r.LargestComm, r.LargestMiB,
		r.HarnessRequests, r.HarnessPerWorker, r.LoadStart, r.LoadEnd)
}

// Report is results.json.
type Report struct {
	// Base is the 1-worker run every ratio is to.
	Base string   `json:"base"`
	Runs []Result `json:"runs"`
}

func writeReport(dir string, rs []Result) error {
	for i := range rs[1:] {
		r := &rs[i+1]
		if added := r.Workers - rs[0].Workers; added > 0 {
			r.HarnessPerAddedWorker = float64(r.HarnessRequests-rs[0].HarnessRequests) / float64(added)
		}
	}
	b, err := json.MarshalIndent(Report{Base: rs[0].Label, Runs: rs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(Markdown(rs)), 0o644)
}

func ratio(v, base float64) string {
	if base <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v/base)
}

// Markdown is the runs as ratios to the first (the 1-worker run), with the absolute figure of
// the first, then each join stage's median and maximum per run.
func Markdown(rs []Result) string {
	var b strings.Builder
	base := rs[0]
	fmt.Fprintf(&b, "Ratios to %s (%.1f s wall, %.0f CPU-s, %.0f MiB peak, %.1f harness requests per worker).\n\n", base.Label, base.Wall, base.CPU, base.PeakTreeMiB, base.HarnessPerWorker)
	b.WriteString("| run | workers | verdict | wall | CPU-s | peak RSS (tree) | largest process | harness CPU share | harness requests per worker | per added worker | load (1 min) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		load, _, _ := strings.Cut(r.LoadStart, " ")
		added := "-"
		if r.HarnessPerAddedWorker != 0 {
			added = fmt.Sprintf("%.1f", r.HarnessPerAddedWorker)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s %.0f MiB | %.1f%% | %.1f (%s) | %s | %s |\n",
			r.Label, r.Workers, r.Verdict, ratio(r.Wall, base.Wall), ratio(r.CPU, base.CPU), ratio(r.PeakTreeMiB, base.PeakTreeMiB),
			r.LargestComm, r.LargestMiB, 100*r.HarnessShare, r.HarnessPerWorker, ratio(r.HarnessPerWorker, base.HarnessPerWorker), added, load)
	}
	b.WriteString("\nJoin stages over the scaled pools, seconds, median / max:\n\n")
	var stages []string
	seen := map[string]bool{}
	for _, r := range rs {
		for _, s := range r.Stages {
			if !seen[s.Stage] {
				seen[s.Stage] = true
				stages = append(stages, s.Stage)
			}
		}
	}
	b.WriteString("| stage |")
	for _, r := range rs {
		fmt.Fprintf(&b, " %s |", r.Label)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(rs)) + "\n")
	for _, name := range stages {
		fmt.Fprintf(&b, "| %s |", name)
		for _, r := range rs {
			cell := "-"
			for _, s := range r.Stages {
				if s.Stage == name {
					cell = fmt.Sprintf("%.1f / %.1f", s.Median, s.Max)
				}
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nEach worker's hand-overs from its Machine to its nodeRef, seconds over the workers, median / max:\n\n")
	b.WriteString("| step | by |")
	for _, r := range rs {
		fmt.Fprintf(&b, " %s |", r.Label)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(rs)) + "\n")
	rows := []moment{{step: MachinesCreated, by: "Cluster API MachineSet controller, one Machine after another (per pool)"}}
	for _, m := range append(rows, moments()[1:]...) {
		fmt.Fprintf(&b, "| %s | %s |", m.step, m.by)
		for _, r := range rs {
			cell := "-"
			for _, s := range r.Steps {
				if s.Name == m.step {
					cell = fmt.Sprintf("%.1f / %.1f", s.Median, s.Max)
				}
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	for _, r := range rs {
		if len(r.Failures) > 0 {
			fmt.Fprintf(&b, "\n%s: %s\n", r.Label, strings.Join(r.Failures, "; "))
		}
	}
	return b.String()
}
