package report

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
)

// Options are what the orchestrator knows at the end of a run.
type Options struct {
	// Dir is the run's artifacts folder; suites wrote into Dir/suites/<suite>.
	Dir  string
	Lane string
	// LaneFile is the lane file the run used; its content is copied for the repro.
	LaneFile string
	// SoftClasses is the lane's policy (lane.Policy.Soft).
	SoftClasses []string
	RunID       string
	// Suites are the suites the lane ran (or meant to run), in order.
	Suites []string
	// Timings and Failures are the harness's own (bring-up phases, teardown).
	Timings  budget.Timings
	Failures []verdict.Failure
	// Manifest holds the harness's own collectors and streams.
	Manifest *diag.Manifest
	// Interrupted says a signal stopped the run; Signal names it.
	Interrupted bool
	Signal      string
	Start, End  time.Time
	// Clusters are the lane's conformance clusters with their releases and pools; the verdict
	// judges each on its own pools.
	Clusters []verdict.Cluster
	// Repro carries the commit, dirtiness and the environment that chose faults.
	Repro Repro
	// Baseline is a baseline.json to compare a red run with (optional).
	Baseline string
	// LinkBase prefixes links in summary.md (optional).
	LinkBase string
	// Secrets are values that must appear in no artifact (the sim canary); the folder is
	// scanned for them after everything is written.
	Secrets []string
	// StepSummary, when set ($GITHUB_STEP_SUMMARY), gets summary.md appended.
	StepSummary string
}

// Write judges the run and writes its reports into Dir: verdict.json, junit.xml, summary.md,
// report.html, timings.json, manifest.json, repro.txt (with repro.json and lane/<lane>.yaml) and, for a green run,
// baseline.json. The suites' failures.json, timings.json, junit.xml and manifest.json are merged
// in; a suite that left no failures.json is a harness failure. Last, the folder is scanned for
// the secrets: a leak is a harness failure, the leaked files are scrubbed and the reports
// rewritten. The returned verdict's ExitCode is the run's.
func Write(o Options) (verdict.Verdict, error) {
	policy, err := verdict.NewPolicy(o.SoftClasses)
	if err != nil {
		o.Failures = append(o.Failures, verdict.Failure{Spec: "lane policy", Class: verdict.Configuration, Message: err.Error(), At: o.End})
	}
	r := readSuites(o)
	errs := r.errs
	repro := o.Repro
	repro.Lane, repro.RunID = o.Lane, o.RunID
	if o.LaneFile != "" {
		if repro, err = WriteRepro(o.Dir, o.LaneFile, repro); err != nil {
			errs = append(errs, err)
		}
	}
	var base *Baseline
	if o.Baseline != "" {
		if b, err := ReadBaseline(o.Baseline); err == nil {
			base = &b
		} else {
			errs = append(errs, fmt.Errorf("baseline: %w", err))
		}
	}
	in := verdict.Input{Lane: o.Lane, RunID: o.RunID, Policy: policy, Failures: r.failures, Skipped: r.skipped, Interrupted: o.Interrupted,
		Signal: o.Signal, Start: o.Start, End: o.End, Clusters: o.Clusters}
	v, err := writeAll(o, in, r.timings, r.manifest, r.suites, repro, base)
	if err != nil {
		return v, errors.Join(append(errs, err)...)
	}
	if len(o.Secrets) > 0 {
		if leak := diag.Scan(o.Dir, o.Secrets...); leak != nil {
			_, serr := diag.ScrubTree(o.Dir, diag.NewRedactor(o.Secrets...))
			in.Failures = append(in.Failures, verdict.Failure{Spec: "artifacts hold no secret", Class: verdict.Harness, Stage: "report",
				Message: leak.Error() + " (the files were scrubbed after the fact)", At: o.End})
			if v, err = writeAll(o, in, r.timings, r.manifest, r.suites, repro, base); err != nil || serr != nil {
				errs = append(errs, err, serr)
			}
		}
	}
	return v, errors.Join(errs...)
}

// suiteResults are the harness's own timings, failures and manifest with what the suites wrote
// merged in, each suite's JUnit report (nil when it wrote none), the checks they skipped, and
// the errors met reading them.
type suiteResults struct {
	timings  budget.Timings
	failures []verdict.Failure
	manifest *diag.Manifest
	suites   map[string]*Suites
	skipped  []verdict.Skip
	errs     []error
}

// readSuites reads what each of o's suites wrote into Dir/suites/<suite>, merged with the
// harness's own, the timings named after o's lane when no suite named them.
func readSuites(o Options) suiteResults {
	r := suiteResults{timings: o.Timings, failures: append([]verdict.Failure(nil), o.Failures...), manifest: diag.NewManifest(), suites: map[string]*Suites{}}
	if o.Manifest != nil {
		r.manifest.Merge(o.Manifest.Entries())
	}
	for _, s := range o.Suites {
		r.read(o.Dir, s, o.End)
	}
	if r.timings.Lane == "" {
		r.timings.Lane = o.Lane
	}
	return r
}

// read merges in suite s's failures.json (its absence is a harness failure at end), timings.json,
// junit.xml and manifest.json from root/suites/<s>; a file that is missing is no error.
func (r *suiteResults) read(root, s string, end time.Time) {
	dir := filepath.Join(root, "suites", s)
	rel := "suites/" + s + "/"
	fs, err := verdict.ReadFailures(filepath.Join(dir, "failures.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		r.failures = append(r.failures, verdict.Failure{Spec: "suite " + s, Class: verdict.Harness, Stage: "suites",
			Message:  "the suite wrote no failures.json: it crashed or was stopped before its end; see its output in " + rel,
			Evidence: []string{rel}, At: end})
	case err != nil:
		r.failures = append(r.failures, verdict.Failure{Spec: "suite " + s, Class: verdict.Harness, Stage: "suites",
			Message: err.Error(), Evidence: []string{rel + "failures.json"}, At: end})
	default:
		r.failures = append(r.failures, fs...)
	}
	if t, err := budget.ReadTimings(filepath.Join(dir, "timings.json")); err == nil {
		r.timings = r.timings.Merge(t)
	} else if !errors.Is(err, os.ErrNotExist) {
		r.errs = append(r.errs, err)
	}
	if j, err := ReadJUnit(filepath.Join(dir, "junit.xml")); err == nil {
		r.suites[s] = &j
		r.skipped = append(r.skipped, Skips(&j)...)
	} else {
		r.suites[s] = nil
		if !errors.Is(err, os.ErrNotExist) {
			r.errs = append(r.errs, err)
		}
	}
	if entries, err := diag.ReadManifest(filepath.Join(dir, "manifest.json")); err == nil {
		r.manifest.Merge(entries)
	} else if !errors.Is(err, os.ErrNotExist) {
		r.errs = append(r.errs, err)
	}
}

func writeAll(o Options, in verdict.Input, timings budget.Timings, manifest *diag.Manifest, suites map[string]*Suites, repro Repro, base *Baseline) (verdict.Verdict, error) {
	v := verdict.Decide(in)
	path := func(n string) string { return filepath.Join(o.Dir, n) }
	var errs []error
	errs = append(errs, v.Write(path("verdict.json")), timings.Write(path("timings.json")), manifest.Write(path("manifest.json")))
	errs = append(errs, MergeJUnit(JUnitInput{Lane: o.Lane, Suites: suites, Timings: timings, Verdict: v}).Write(path("junit.xml")))
	trees, err := ReadTrees(o.Dir)
	errs = append(errs, err)
	var sum bytes.Buffer
	errs = append(errs, WriteSummary(&sum, SummaryInput{Verdict: v, Timings: timings, Manifest: manifest.Entries(), Repro: repro,
		Baseline: base, LinkBase: o.LinkBase, Trees: trees}))
	errs = append(errs, os.WriteFile(path("summary.md"), sum.Bytes(), 0o644))
	var page bytes.Buffer
	errs = append(errs, WriteHTML(&page, HTMLInput{Dir: o.Dir, Verdict: v, Timings: timings, Trees: trees, Repro: repro}))
	errs = append(errs, os.WriteFile(path(HTMLFile), page.Bytes(), 0o644))
	if o.StepSummary != "" {
		errs = append(errs, appendFile(o.StepSummary, sum.Bytes()))
	}
	if v.Result == verdict.Pass {
		consoles, err := ReadConsoles(o.Dir)
		errs = append(errs, err)
		errs = append(errs, BaselineFrom(o.Lane, o.RunID, repro.Commit, o.End, timings, consoles).Write(path("baseline.json")))
	}
	return v, errors.Join(errs...)
}

func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	return errors.Join(werr, f.Close())
}

// Size is the artifacts folder's size in bytes and file count (the done criterion bounds it).
func Size(dir string) (int64, int, error) {
	var n int64
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
			files++
		}
		return nil
	})
	return n, files, err
}
