package e2ecmd

import (
	"context"
	"os"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
	"github.com/cozystack/cozy-e2e/internal/report"
	"github.com/cozystack/cozy-e2e/internal/substrate/kind"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
)

// collectBringUp gathers what explains a failed bring-up, inside the diagnostics reserve,
// before the substrate goes down. A preflight failure has nothing to collect but its own
// report (substrate/preflight.txt); an interrupt leaves no time for it.
func (r *run) collectBringUp(sigCtx context.Context, err error) {
	last := &r.failures[len(r.failures)-1]
	if last.Class == verdict.Preflight || last.Class == verdict.Configuration {
		return
	}
	if sigCtx.Err() != nil {
		r.clock.Decline("bring-up diagnostics", "the run was interrupted")
		return
	}
	ctx, cancel, left := r.clock.Diagnostics(context.Background())
	defer cancel()
	arts, aerr := diag.NewArtifacts(r.artifacts, diag.NewRedactor(r.secrets()...), 0)
	if aerr != nil {
		r.logf("bring-up diagnostics: %v", aerr)
		return
	}
	r.detailf("bring-up failed in %s; collecting diagnostics (%s left)", last.Stage, left.Round(time.Second))
	res := diag.CollectBringUp(ctx, diag.BringUpOptions{
		Budget:    diag.Budget{Clock: r.clock, Reserve: r.lane.Budget.DiagnosticsReserve.D()},
		Artifacts: arts, Manifest: r.manifest, Management: r.partial, Phase: last.Stage, Err: err,
	})
	last.Evidence = append(last.Evidence, res.Evidence...)
	r.detailf("bring-up diagnostics took %s", res.Duration.Round(time.Millisecond))
}

// secrets are values no artifact may hold: the sim's canary, the platform registry's login.
func (r *run) secrets() []string {
	var out []string
	if s, ok := r.sub.(*simulated.Substrate); ok {
		out = append(out, s.Canary())
	}
	if a := kind.RegistryAuthFromEnv(os.Getenv); a != nil && r.lane.Substrate == lane.SubstrateKind {
		for _, v := range a.Secrets() {
			if len(v) >= 8 { // the knob refuses a shorter password; the scan takes no shorter value
				out = append(out, v)
			}
		}
	}
	return out
}

// reproEnv is the environment a repro reruns with: the recorded knobs, and a kind lane's node
// image as this run resolved it (from the lane or E2E_KIND_NODE_IMAGE), so the repro creates its
// nodes from the very image, whatever the lane file or the person's environment say then.
func (r *run) reproEnv() map[string]string {
	env := report.ReproEnv(os.LookupEnv)
	if ni := nodeImageOf(r.lane, os.Getenv); ni != nil && ni.Image != "" {
		env[kind.NodeImageEnv] = ni.Image
	}
	return env
}

// finish judges the run and writes its reports; it returns the exit code.
func (r *run) finish(interrupted bool) int {
	commit, dirty, err := report.GitHead(r.root)
	if err != nil {
		r.logf("repro: %v", err)
	}
	signal := ""
	if interrupted {
		signal = "SIGINT or SIGTERM"
	}
	suites := make([]string, 0, len(r.lane.Suites))
	if r.ranSuites {
		for _, s := range r.lane.Suites {
			suites = append(suites, s.Name)
		}
	}
	v, err := report.Write(report.Options{
		Dir: r.artifacts, Lane: r.lane.Name, LaneFile: r.laneCopy(), SoftClasses: r.lane.Policy.Soft,
		RunID: r.opts.RunID, Suites: suites, Timings: r.clock.Timings(), Failures: r.failures,
		Manifest: r.manifest, Interrupted: interrupted, Signal: signal, Start: r.started, End: time.Now(), Clusters: clusters(r.lane),
		Repro:       report.Repro{Commit: commit, Dirty: dirty, Env: r.reproEnv()},
		Baseline:    os.Getenv("E2E_BASELINE"),
		Secrets:     r.secrets(),
		StepSummary: os.Getenv("GITHUB_STEP_SUMMARY"),
	})
	if err != nil {
		r.logf("writing the reports: %v", err)
	}
	// The live lines end here: the failures, last before the verdict, and the verdict are the
	// end of what a person reads.
	r.con.Close()
	for _, s := range v.Skipped {
		r.con.Line("SKIP " + clip(s.Line(), 400))
	}
	for _, f := range v.Failures {
		r.con.Line("FAIL " + clip(f.Line(), 400))
	}
	r.logf("verdict: %s (exit %d) in %s; reports in %s (open report.html)", v.Result, v.ExitCode, time.Since(r.started).Round(time.Millisecond), r.artifacts)
	if err != nil && v.ExitCode == exitPass {
		return exitFail
	}
	return v.ExitCode
}

// clusters are the lane's conformance clusters as the verdict judges them.
func clusters(l *lane.Lane) []verdict.Cluster {
	var out []verdict.Cluster
	for _, c := range l.ConformanceClusters() {
		vc := verdict.Cluster{Name: c.Name, Version: c.Kubernetes.Version, Patch: c.Kubernetes.Patch}
		for _, p := range l.Pools {
			if p.ClusterName() == c.Name {
				vc.Pools = append(vc.Pools, p.Name)
			}
		}
		out = append(out, vc)
	}
	return out
}

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
