package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/diag"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/substrate"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/framework/verdict/report"
	"github.com/cozystack/cozy-e2e/suites/registry"
)

// runOptions are the flags and environment of one run.
type runOptions struct {
	Lane      string
	LanesDir  string
	Artifacts string
	RunID     string
	JobStart  time.Time
	Keep      bool
	Reuse     bool
	NoBuild   bool
}

// run is one lane run: its lane, clock, folders and what it found.
type run struct {
	opts      runOptions
	lane      *lane.Lane
	root      string // project root
	artifacts string
	work      string
	clock     *budget.Clock
	out       io.Writer // the terminal and harness.log
	logFile   *os.File
	sub       substrate.Substrate
	partial   *cluster.Cluster // the management cluster a failed Up handed back
	// components are the substrate's real components, for run.json.
	components []substrate.Component
	newSub     func(*lane.Lane, substrate.Options) (substrate.Substrate, error)
	failures   []verdict.Failure
	ranSuites  bool           // the suites started (their reports are expected)
	manifest   *diag.Manifest // the harness's own collectors
	started    time.Time
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseRunFlags(args, stderr)
	if err != nil {
		return exitConfig
	}
	r, err := newRun(opts, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "e2e run: %v\n", err)
		return exitConfig
	}
	defer r.close()
	return r.execute(ctx)
}

func parseRunFlags(args []string, stderr io.Writer) (runOptions, error) {
	fs := flag.NewFlagSet("e2e run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := runOptions{}
	fs.StringVar(&o.Lane, "lane", envOr("LANE", "sim"), "lane name (lanes/<name>.yaml) or lane file")
	fs.StringVar(&o.LanesDir, "lanes-dir", "lanes", "folder of the lane files")
	fs.BoolVar(&o.NoBuild, "no-build", false, "use the suite binaries in bin/suites as they are")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Artifacts = os.Getenv("E2E_ARTIFACTS")
	o.RunID = envOr("E2E_RUN_ID", randomID())
	o.Keep = os.Getenv("E2E_KEEP") == "1"
	o.Reuse = os.Getenv("E2E_REUSE") == "1"
	if s := os.Getenv("E2E_JOB_START"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			fmt.Fprintf(stderr, "e2e run: E2E_JOB_START=%q is not an RFC 3339 time (2026-12-02T10:00:00Z): %v\n", s, err)
			return o, err
		}
		o.JobStart = t
	}
	return o, nil
}

func newRun(o runOptions, stdout io.Writer) (*run, error) {
	root, err := projectRoot()
	if err != nil {
		return nil, err
	}
	dir := o.LanesDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	l, err := lane.Find(dir, o.Lane)
	if err != nil {
		return nil, err
	}
	if errs := l.CheckSuites(registry.Catalog()); len(errs) > 0 {
		return nil, errs
	}
	started := time.Now()
	artifacts, err := prepareArtifacts(root, o.Artifacts, l.Name, started)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "cozy-e2e-"+l.Name+"-")
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(artifacts, "harness.log"))
	if err != nil {
		return nil, err
	}
	r := &run{
		opts: o, lane: l, root: root, artifacts: artifacts, newSub: newSubstrate, work: work, logFile: logFile, manifest: diag.NewManifest(),
		out: io.MultiWriter(stdout, logFile), started: started,
		clock: budget.New(l.Budget, budget.Options{JobStart: o.JobStart, Lane: l.Name}),
	}
	// The lane as run, under its own name, so a repro loads it exactly.
	if err := os.MkdirAll(filepath.Join(artifacts, "lane"), 0o755); err != nil {
		return nil, err
	}
	if err := copyFile(l.File, r.laneCopy()); err != nil {
		return nil, err
	}
	if err := writeRunInfo(r); err != nil {
		return nil, err
	}
	return r, nil
}

// laneCopy is the lane file as this run used it, inside the artifacts.
func (r *run) laneCopy() string {
	return filepath.Join(r.artifacts, filepath.FromSlash(report.LaneCopy(r.lane.Name)))
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.out, "%s e2e: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// execute brings the substrate up, runs the suites, tears down and judges. Whatever happens,
// the verdict and reports are written before it returns.
func (r *run) execute(parent context.Context) int {
	sigCtx, stopSignals := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := r.clock.Root(sigCtx)
	defer cancel()
	r.logf("lane %s (%s substrate), run %s, artifacts %s", r.lane.Name, r.lane.Substrate, r.opts.RunID, r.artifacts)
	r.logf("budget: root deadline %s (in %s)", r.clock.RootDeadline().UTC().Format(time.RFC3339), r.clock.Remaining().Round(time.Second))

	mgmt, err := r.bringUp(ctx)
	if err != nil {
		r.collectBringUp(sigCtx, err)
	} else {
		r.runSuites(ctx, mgmt)
	}
	interrupted := sigCtx.Err() != nil
	stopSignals() // a second signal during teardown kills the harness, and Pdeathsig its children
	if r.opts.Keep {
		// The reports first: the substrate then holds everything up until the person is done.
		code := r.finish(interrupted)
		r.keep()
		return code
	}
	r.down()
	return r.finish(interrupted)
}

// bringUp runs preflight and the substrate's own phases.
func (r *run) bringUp(ctx context.Context) (*cluster.Cluster, error) {
	sub, err := r.newSub(r.lane, substrate.Options{
		Artifacts: r.artifacts, WorkDir: r.work, Keep: r.opts.Keep, Reuse: r.opts.Reuse, Log: r.out,
	})
	if err != nil {
		r.fail(verdict.Configuration, "configuration", err)
		return nil, err
	}
	r.sub = sub
	pctx, span, err := r.clock.Phase(ctx, "preflight")
	if err != nil {
		r.fail(verdict.Deadline, "preflight", err)
		return nil, err
	}
	err = sub.Preflight(pctx)
	span.End(err)
	if err != nil {
		r.fail(verdict.Preflight, "preflight", err)
		return nil, err
	}
	r.listComponents(sub)
	r.logf("preflight ok; bringing up the %s substrate", sub.Name())
	mgmt, err := sub.Up(ctx, r.clock)
	if err != nil {
		class := verdict.Install
		var pe *substrate.PreflightError
		var ex *budget.ExhaustedError
		switch {
		case errors.As(err, &pe):
			class = verdict.Preflight
		case errors.As(err, &ex), errors.Is(err, context.DeadlineExceeded):
			class = verdict.Deadline
		}
		r.fail(class, r.lastPhase(), err)
		r.partial = mgmt // as far as it came up: the bring-up diagnostics read it
		return nil, err
	}
	return mgmt, nil
}

// lastPhase is the phase the clock recorded last, the one a bring-up error belongs to.
func (r *run) lastPhase() string {
	t := r.clock.Timings()
	if n := len(t.Phases); n > 0 {
		return t.Phases[n-1].Name
	}
	return "cluster"
}

func (r *run) down() {
	if r.sub == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), downGrace(r.lane))
	defer cancel()
	start := time.Now()
	if err := r.sub.Down(ctx); err != nil {
		r.fail(verdict.Teardown, "teardown", fmt.Errorf("substrate %s down: %w", r.sub.Name(), err))
	}
	r.logf("substrate %s down in %s", r.sub.Name(), time.Since(start).Round(time.Millisecond))
}

// keep hands the substrate to a person (E2E_KEEP=1): its Down says how to reach every cluster
// and holds them up until the next SIGINT or SIGTERM (the sim's processes live as long as this
// one; a kind cluster outlives it).
func (r *run) keep() {
	if r.sub == nil {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r.logf("E2E_KEEP=1: kept; Ctrl-C (SIGINT) or SIGTERM ends it")
	if err := r.sub.Down(ctx); err != nil {
		r.logf("substrate %s down: %v", r.sub.Name(), err)
	}
}

// downGrace bounds the teardown of the substrate: the lane's teardown ceiling.
func downGrace(l *lane.Lane) time.Duration {
	if p, ok := l.Budget.Phase("teardown"); ok {
		return p.Ceiling.D()
	}
	return l.Budget.ArtifactReserve.D()
}

func (r *run) fail(class verdict.Class, stage string, err error) {
	r.logf("%s (%s): %v", stage, class, err)
	r.failures = append(r.failures, verdict.Failure{
		Spec: "harness " + stage, Class: class, Stage: stage, Message: err.Error(), At: time.Now(),
	})
}

func (r *run) close() {
	if r.logFile != nil {
		r.logFile.Close()
	}
	if !r.opts.Keep && r.work != "" {
		os.RemoveAll(r.work)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func randomID() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b)
}

func projectRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "lanes")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("run e2e from the project (no lanes/ and go.mod above %s)", dir)
		}
	}
}

func prepareArtifacts(root, dir, laneName string, started time.Time) (string, error) {
	if dir == "" {
		base := filepath.Join(root, "_artifacts")
		dir = filepath.Join(base, laneName+"-"+started.UTC().Format("20060102T150405Z"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		latest := filepath.Join(base, "latest")
		_ = os.Remove(latest)
		if err := os.Symlink(filepath.Base(dir), latest); err != nil {
			return "", err
		}
		return dir, nil
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return "", fmt.Errorf("E2E_ARTIFACTS=%s is not empty; give a new folder so runs never mix their evidence", dir)
	}
	return dir, os.MkdirAll(dir, 0o755)
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

// joinLines indents lines for the terminal.
func joinLines(lines []string) string { return "  " + strings.Join(lines, "\n  ") }
