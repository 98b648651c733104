package suiterun

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
	"github.com/cozystack/cozy-e2e/internal/progress"
)

// Suite is one suite process: its environment, lane, clock, management cluster and run,
// the failures it records and the diagnostics it streams.
type Suite struct {
	Name     string
	Env      Env
	Lane     *lane.Lane
	Clock    *budget.Clock
	Mgmt     *cluster.Cluster
	Run      tenant.Run
	Failures *Failures
	// Log is where progress lines for people go: the orchestrator's console as details when
	// it listens (EnvProgress), else the suite's output.
	Log io.Writer

	manifest *diag.Manifest
	// stream is the suite's diagnostics, which the testbed starts, feeds and asks for a leak's
	// evidence (testbed.Options.Diagnostics); a failed spec's evidence and Finish use it too.
	stream *diag.TenantStream
	events progress.Sink // nil when no orchestrator listens
	// interrupt ends at the signal that interrupts the suite (interrupt.go).
	interrupt context.Context
}

// Setup reads the lane, starts the clock at the job's start and connects to the management
// cluster. name is the suite's name (suites/<name>), phases the lane phases it runs in on a
// lane (its label filter decides which specs run). A lane without one of them, or with too
// short a ceiling, gives a Suite whose only failure is of class configuration, and a
// *ConfigurationError: the suite writes its reports (Finish) and runs nothing.
func Setup(name string, env Env, phases func(*lane.Lane) ([]lane.PhaseNeed, error)) (*Suite, error) {
	// The suite reports through Ginkgo and its evidence; controller-runtime's own log (client
	// caches) is set explicitly so it does not print a stack trace into the output after 30 s.
	ctrllog.SetLogger(logr.Discard())
	l, err := lane.Load(env.LaneFile)
	if err != nil {
		return nil, err
	}
	run, err := tenant.NewRun(env.RunID)
	if err != nil {
		return nil, err
	}
	mgmt, err := cluster.FromKubeconfig("management", env.Kubeconfig)
	if err != nil {
		return nil, err
	}
	s := &Suite{Name: name, Env: env, Lane: l, Run: run, Mgmt: mgmt, Failures: NewFailures(), Log: os.Stdout,
		manifest: diag.NewManifest()}
	opts := budget.Options{JobStart: env.JobStart, Lane: l.Name}
	em, err := progress.FromEnv(func(string) string { return env.Progress })
	if err != nil {
		return nil, err
	}
	if em != nil {
		s.events = em.Emit
		s.Log = progress.Lines(s.events)
		opts.Observer = progress.ClockObserver(s.events)
		s.Failures.Decided = func(f verdict.Failure) {
			s.events(progress.Event{Kind: progress.Failure, Pool: f.Pool, Class: string(f.Class), Stage: f.Stage, Detail: f.Line()})
		}
	}
	s.Clock = budget.New(l.Budget, opts)
	s.watchInterrupt()
	s.stream = diag.NewTenantStream(diag.TenantStreamOptions{Artifacts: env.Artifacts, Manifest: s.manifest, Process: "suite " + name,
		Management: mgmt, DefaultCluster: lane.DefaultCluster,
		Budget: diag.Budget{Clock: s.Clock, Reserve: l.Budget.DiagnosticsReserve.D()}, Interrupt: s.interrupt})
	needs, err := phases(l)
	if err != nil {
		ce := &ConfigurationError{File: l.File, Err: fmt.Errorf("suite %s cannot run on this lane: %w", name, err)}
		s.Failures.Add(verdict.Failure{Spec: "suite " + name, Class: verdict.Configuration, Message: ce.Error()})
		return s, ce
	}
	if errs := l.CheckSuites(lane.SuiteCatalog{name: needs}); len(errs) > 0 {
		ce := &ConfigurationError{File: l.File, Err: fmt.Errorf("suite %s cannot run on this lane: %w", name, errs)}
		s.Failures.Add(verdict.Failure{Spec: "suite " + name, Class: verdict.Configuration, Message: ce.Error()})
		return s, ce
	}
	return s, nil
}

// JoinLog is where a join's own progress lines go: nowhere when its OnProgress carries them.
func (s *Suite) JoinLog() io.Writer {
	if s.events != nil {
		return nil
	}
	return s.Log
}

// ConfigurationError is a suite that cannot run its specs on this lane: the lane lacks a phase
// the suite needs, or names something the suite does not know (testbed.ConfigurationError).
type ConfigurationError = testbed.ConfigurationError

// Finish stops the streams and writes failures.json, timings.json and manifest.json into the
// suite's artifacts folder. It returns the first error and still tries every file.
func (s *Suite) Finish() error {
	s.stream.Stop()
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if err := os.MkdirAll(s.Env.SuiteArtifacts, 0o755); err != nil {
		return err
	}
	dir := s.Env.SuiteArtifacts
	keep(verdict.WriteFailures(filepath.Join(dir, "failures.json"), s.Failures.All()))
	keep(s.Clock.Timings().Write(filepath.Join(dir, "timings.json")))
	keep(s.manifest.Write(filepath.Join(dir, "manifest.json")))
	return first
}
