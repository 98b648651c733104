package e2ecmd

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
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
	"github.com/cozystack/cozy-e2e/internal/progress"
	"github.com/cozystack/cozy-e2e/internal/registry"
	"github.com/cozystack/cozy-e2e/internal/report"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// runOptions are the flags and environment of one run.
type runOptions struct {
	Lane      string
	LanesDir  string
	Artifacts string
	RunID     string
	JobStart  time.Time
	Keep      keepMode
	Reuse     bool
	NoBuild   bool
	// CheckOnly checks the flags, the lane and the knobs, and stops (make e2e does it before
	// building the tools).
	CheckOnly bool
	// lane is the lane as configure loaded it (newRun loads Lane when it is nil).
	lane *lane.Lane
	// laneFlag says --lane was given (not LANE).
	laneFlag bool
}

// run is one lane run: its lane, clock, folders and what it found.
type run struct {
	opts      runOptions
	lane      *lane.Lane
	root      string // project root
	artifacts string
	work      string
	clock     *budget.Clock
	con       *progress.Console // the terminal (live on a TTY) and harness.log
	logFile   *os.File
	sub       substrate.Substrate
	partial   *cluster.Cluster // the management cluster a failed Up handed back
	// components are the substrate's real components, for run.json.
	components []substrate.Component
	newSub     func(*lane.Lane, substrate.Options) (substrate.Substrate, error)
	failures   []verdict.Failure
	ranSuites  bool              // the suites started (their reports are expected)
	builds     map[string]*build // the suites' builds, started with the substrate
	manifest   *diag.Manifest    // the harness's own collectors
	started    time.Time
	// keptPast: the clusters outlive this process (a kept kind or existing cluster), so its
	// work folder (their kubeconfigs) stays.
	keptPast bool
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := configure(args, os.Getenv, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) && err.Error() != "" {
			fmt.Fprintf(stderr, "e2e run: %s\n", strings.ReplaceAll(err.Error(), "\n", "\ne2e run: "))
		}
		return exitConfig
	}
	if opts.CheckOnly {
		if root, err := projectRoot(); err == nil {
			accepted(stdout, root, opts.lane)
		}
		return exitPass
	}
	r, err := newRun(opts, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "e2e run: %v\n", err)
		return exitConfig
	}
	defer r.close()
	return r.execute(ctx)
}

// errFlags is a flag error the flag package has printed already.
var errFlags = errors.New("")

// configure reads the flags, loads the lane and checks every knob, before anything is made or
// started: a bad value ends the run here, with exit 2.
func configure(args []string, getenv func(string) string, stderr io.Writer) (runOptions, error) {
	o, err := parseRunFlags(args, getenv, stderr)
	if err != nil {
		return o, errFlags
	}
	root, err := projectRoot()
	if err != nil {
		return o, err
	}
	dir := o.LanesDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return o, fmt.Errorf("--lanes-dir %s: no such folder; want the folder of the lane files (example: --lanes-dir lanes)", o.LanesDir)
	}
	if o.lane, err = lane.Find(dir, o.Lane); err != nil {
		src := fmt.Sprintf("--lane %s", o.Lane)
		if !o.laneFlag {
			src = fmt.Sprintf("LANE=%q", o.Lane)
		}
		return o, fmt.Errorf("%s: %w; want a lane name or lane file (example: make e2e LANE=sim)", src, err)
	}
	if o.CheckOnly && o.lane.Deprecation != "" {
		fmt.Fprintf(stderr, "e2e run: %s\n", o.lane.Deprecation)
	}
	if err := checkKnobs(getenv, o.lane); err != nil {
		return o, err
	}
	// What the lane's suites need of it (their phases, the room for their workers) is refused
	// here too, so --check says what a run would refuse before any phase.
	if err := registry.Check(o.lane); err != nil {
		return o, err
	}
	o.Artifacts = getenv("E2E_ARTIFACTS")
	o.RunID = getenv("E2E_RUN_ID")
	if o.RunID == "" {
		o.RunID = randomID()
	}
	o.Keep = keepEnv(getenv("E2E_KEEP"))
	o.Reuse = getenv("E2E_REUSE") == "1"
	if s := getenv("E2E_JOB_START"); s != "" {
		o.JobStart, _ = time.Parse(time.RFC3339Nano, s)
	}
	return o, nil
}

func parseRunFlags(args []string, getenv func(string) string, stderr io.Writer) (runOptions, error) {
	fs := flag.NewFlagSet("e2e run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := runOptions{}
	def := getenv("LANE")
	if def == "" {
		def = "sim"
	}
	fs.StringVar(&o.Lane, "lane", def, "lane name (lanes/<name>.yaml) or lane file; LANE sets the default")
	fs.StringVar(&o.LanesDir, "lanes-dir", "lanes", "folder of the lane files")
	fs.BoolVar(&o.NoBuild, "no-build", false, "use the suite binaries in bin/suites as they are")
	fs.BoolVar(&o.CheckOnly, "check", false, "check the flags, the lane and the environment, then stop (exit 0 or 2)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	fs.Visit(func(f *flag.Flag) { o.laneFlag = o.laneFlag || f.Name == "lane" })
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "e2e run: unexpected argument %q; flags only (example: e2e run --lane sim)\n", fs.Arg(0))
		return o, errFlags
	}
	return o, nil
}

func newRun(o runOptions, stdout io.Writer) (*run, error) {
	root, err := projectRoot()
	if err != nil {
		return nil, err
	}
	l := o.lane
	if l == nil {
		dir := o.LanesDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		if l, err = lane.Find(dir, o.Lane); err != nil {
			return nil, err
		}
	}
	if l.Deprecation != "" {
		fmt.Fprintf(stdout, "e2e: %s\n", l.Deprecation)
	}
	if err := registry.Check(l); err != nil {
		return nil, err
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
	con := progress.NewConsole(progress.Options{Out: stdout, Log: logFile, Live: progress.IsTerminal(stdout)})
	r := &run{
		opts: o, lane: l, root: root, artifacts: artifacts, newSub: newSubstrate, work: work, logFile: logFile, manifest: diag.NewManifest(),
		con: con, started: started,
		clock: budget.New(l.Budget, budget.Options{JobStart: o.JobStart, Lane: l.Name, Observer: progress.ClockObserver(con.Event)}),
	}
	// The lane as run, under its own name, so a repro loads it exactly.
	if err := os.MkdirAll(filepath.Join(artifacts, "lane"), 0o755); err != nil {
		return nil, err
	}
	if l.Resolved != nil {
		// A lane that extends another is copied as one document, so its repro needs no other file.
		if err := os.WriteFile(r.laneCopy(), l.Resolved, 0o644); err != nil {
			return nil, err
		}
	} else if err := copyFile(l.File, r.laneCopy()); err != nil {
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

// logf is a line a person reads (the terminal and harness.log); detailf one harness.log keeps
// (and the live line of the phase shows).
func (r *run) logf(format string, args ...any) { r.con.Printf(format, args...) }

func (r *run) detailf(format string, args ...any) { r.con.Detailf(format, args...) }

// execute brings the substrate up, runs the suites, tears down and judges. Whatever happens,
// the verdict and reports are written before it returns.
func (r *run) execute(parent context.Context) int {
	sigCtx, stopSignals := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := r.clock.Root(sigCtx)
	defer cancel()
	r.logf("lane %s (%s substrate), run %s, artifacts %s", r.lane.Name, r.lane.Substrate, r.opts.RunID, r.artifacts)
	r.logf("budget: root deadline %s (in %s)", r.clock.RootDeadline().UTC().Format(time.RFC3339), r.clock.Remaining().Round(time.Second))

	r.builds = r.buildSuites(ctx)
	mgmt, err := r.bringUp(ctx)
	if err != nil {
		r.collectBringUp(sigCtx, err)
	} else {
		r.runSuites(ctx, mgmt)
	}
	interrupted := sigCtx.Err() != nil
	stopSignals() // a second signal during teardown kills the harness, and Pdeathsig its children
	if keep, why := r.keeps(interrupted); keep {
		// Nothing is torn down. The reports first; how to reach what was kept is printed last.
		code := r.finish(interrupted)
		r.keep(why)
		return code
	}
	r.down()
	return r.finish(interrupted)
}

// bringUp runs preflight and the substrate's own phases.
func (r *run) bringUp(ctx context.Context) (*cluster.Cluster, error) {
	sub, err := r.newSub(r.lane, substrate.Options{
		Artifacts: r.artifacts, WorkDir: r.work, Reuse: r.opts.Reuse, Log: r.con.Lines(),
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
	r.detailf("preflight ok; bringing up the %s substrate", sub.Name())
	mgmt, err := sub.Up(ctx, r.clock)
	if err != nil {
		class := verdict.Install
		var pe *substrate.PreflightError
		var ex *budget.ExhaustedError
		switch {
		case errors.As(err, &pe):
			class = verdict.Preflight
		case errors.As(err, new(*substrate.ConfigurationError)):
			class = verdict.Configuration
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

// downGrace bounds the teardown of the substrate: the lane's teardown ceiling.
func downGrace(l *lane.Lane) time.Duration {
	if p, ok := l.Budget.Phase("teardown"); ok {
		return p.Ceiling.D()
	}
	return l.Budget.ArtifactReserve.D()
}

func (r *run) fail(class verdict.Class, stage string, err error) {
	f := verdict.Failure{Spec: "harness " + stage, Class: class, Stage: stage, Message: err.Error(), At: time.Now()}
	r.con.Event(progress.Event{At: f.At, Kind: progress.Failure, Class: string(class), Stage: stage, Detail: f.Line()})
	r.failures = append(r.failures, f)
}

func (r *run) close() {
	r.con.Close()
	if r.logFile != nil {
		r.logFile.Close()
	}
	if !r.keptPast && r.work != "" {
		os.RemoveAll(r.work)
	}
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
