package suiterun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// Config is a suite: its name, what it needs of a lane, and its specs. Run does the rest.
type Config struct {
	// Name is the suite's name, as lanes name it (suites[].name).
	Name string
	// Phases are the lane phases the suite runs in on lane l (its label filter there decides
	// which specs run). Nil: the phases its suite.yaml declares (ReadNeeds), in the folder
	// the suite runs in.
	Phases func(l *lane.Lane) ([]lane.PhaseNeed, error)
	// Specs registers the suite's specs, inside its one Ordered container; the world is
	// brought up before the first of them runs and torn down after the last.
	Specs func(w *World)
	// WhileJoining runs once the pools phase started, in its context (work that belongs to
	// the phase: a cluster rendering while the pools join); nil: nothing.
	WhileJoining func(ctx context.Context, w *World)
}

// Run is a whole suite as a Go test: it reads the orchestrator's environment, the lane and
// the budget, connects to the management cluster, holds the lane to the suite's phases (a lane
// that cannot run it gets a configuration failure and no spec runs), and runs c.Specs in one
// Ordered Ginkgo container whose first node brings the tenant up (phases tenant and pools) and
// whose cleanup tears it down (phase teardown) unless the run keeps it (E2E_KEEP). The evidence
// of a failed spec is collected right after it; a signal stops the joins and declines further
// evidence; failures.json, timings.json and manifest.json are written at the end, whatever
// happened. Run bare (go test ./...), it skips and says how to run the suite.
func Run(t *testing.T, c Config) {
	t.Helper()
	if !Present(os.Getenv) {
		t.Skipf("suite %s runs under the orchestrator: bin/e2e run --lane <a lane naming it> (make e2e LANE=<lane>)", c.Name)
	}
	env, err := FromEnviron(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	phases := c.Phases
	if phases == nil {
		phases = func(*lane.Lane) ([]lane.PhaseNeed, error) {
			n, err := ReadNeeds(NeedsFile)
			if err != nil {
				return nil, err
			}
			return n.PhaseNeeds(), nil
		}
	}
	s, err := Setup(c.Name, env, phases)
	if ce := (*ConfigurationError)(nil); errors.As(err, &ce) {
		if ferr := s.Finish(); ferr != nil {
			t.Error(ferr)
		}
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	gomega.RegisterFailHandler(ginkgo.Fail)
	w := newWorld(s)
	w.t = t
	ginkgo.ReportAfterEach(func(r ginkgo.SpecReport) { s.Failures.Spec(r) })
	ginkgo.ReportAfterSuite("failures, timings and manifest", func(ginkgo.Report) {
		if err := s.Finish(); err != nil {
			fmt.Fprintf(s.Log, "suite %s: writing its reports: %v\n", c.Name, err)
		}
	})
	ginkgo.Describe(c.Name, ginkgo.Ordered, ginkgo.ContinueOnFailure, ginkgo.Label("lane:"+s.Lane.Name), func() {
		ginkgo.BeforeAll(func(ctx ginkgo.SpecContext) {
			ginkgo.DeferCleanup(func(ctx ginkgo.SpecContext) { w.teardown(ctx) })
			w.bringUp(ctx, c.WhileJoining)
		})
		ginkgo.AfterEach(func(ctx ginkgo.SpecContext) { w.evidence(ctx) })
		if c.Specs != nil {
			c.Specs(w)
		}
	})
	ginkgo.RunSpecs(t, c.Name)
}
