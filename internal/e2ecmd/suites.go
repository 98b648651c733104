package e2ecmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/progress"
)

// suiteGrace is how long an interrupted suite has to run its cleanup and write its reports
// before it is killed; the whole interrupt must end within 30 s.
const suiteGrace = 15 * time.Second

// runSuites runs each of the lane's suites in order against the management cluster.
func (r *run) runSuites(ctx context.Context, mgmt *cluster.Cluster) {
	kubeconfig := filepath.Join(r.work, "management.kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig, "management", mgmt.REST); err != nil {
		r.fail(verdict.Harness, "suites", err)
		return
	}
	r.ranSuites = true
	for _, s := range r.lane.Suites {
		if ctx.Err() != nil {
			r.clock.Decline("suite "+s.Name, fmt.Sprintf("not started: %v", ctx.Err()))
			continue
		}
		r.runSuite(ctx, s, kubeconfig)
	}
}

// runSuite runs suite s's binary against the management cluster's kubeconfig, with its output
// in suites/<name>/output.log and its progress events drawn on the console, and collects it.
func (r *run) runSuite(ctx context.Context, s lane.Suite, kubeconfig string) {
	dir := filepath.Join(r.artifacts, "suites", s.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.fail(verdict.Harness, "suite "+s.Name, err)
		return
	}
	bin, err := r.builtSuite(ctx, s)
	if err != nil {
		r.fail(verdict.Harness, "suite "+s.Name, err)
		return
	}
	out, err := os.Create(filepath.Join(dir, "output.log"))
	if err != nil {
		r.fail(verdict.Harness, "suite "+s.Name, err)
		return
	}
	defer out.Close()
	cmd := r.suiteCommand(s, bin, dir, kubeconfig)
	// Its output is kept (output.log, harness.log); what a person reads comes as progress
	// events on a pipe of its own (fd 3, E2E_PROGRESS_FD), drawn by the console.
	cmd.Stdout = io.MultiWriter(out, r.con.LogOnly())
	cmd.Stderr = cmd.Stdout
	events, eventsW, err := os.Pipe()
	if err != nil {
		r.fail(verdict.Harness, "suite "+s.Name, err)
		return
	}
	defer events.Close()
	cmd.ExtraFiles = []*os.File{eventsW}
	cmd.Env = append(cmd.Env, progress.EnvFD+"=3")
	// Its own process group, so a Ctrl-C reaches it once, through us; killed if we die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	r.detailf("suite %s: %s", s.Name, bin)
	err = cmd.Start()
	eventsW.Close()
	if err != nil {
		r.fail(verdict.Harness, "suite "+s.Name, err)
		return
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		_ = progress.Read(events, r.con.Event)
	}()
	defer func() {
		// Its events end with it; a straggler holding the pipe gets a moment, not the run.
		select {
		case <-read:
		case <-time.After(2 * time.Second):
			events.Close()
		}
	}()
	r.collectSuite(s.Name, dir, r.waitSuite(ctx, s.Name, cmd))
}

// suiteCommand is the command of suite s's binary bin: its flags (the Ginkgo timeout, the
// reports in dir), its folder and its environment (the lane, the kubeconfig, the artifacts).
func (r *run) suiteCommand(s lane.Suite, bin, dir, kubeconfig string) *exec.Cmd {
	// Ginkgo ends the suite itself a little before the root deadline, so its own cleanup and
	// reports run; SIGINT (on our interrupt) does the same sooner.
	timeout := time.Until(r.clock.RootDeadline()) - suiteGrace
	args := []string{
		"-test.timeout=0", "-test.v",
		"-ginkgo.timeout=" + timeout.Round(time.Second).String(),
		"-ginkgo.grace-period=" + (suiteGrace / 2).String(),
		"-ginkgo.junit-report=" + filepath.Join(dir, "junit.xml"),
		"-ginkgo.json-report=" + filepath.Join(dir, "report.json"),
		"-ginkgo.no-color",
	}
	if s.LabelFilter != "" {
		args = append(args, "-ginkgo.label-filter="+s.LabelFilter)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = suiteDir(r.root, s)
	cmd.Env = append(os.Environ(),
		"E2E_LANE_FILE="+r.laneCopy(),
		"E2E_KUBECONFIG="+kubeconfig,
		"E2E_ARTIFACTS="+r.artifacts,
		"E2E_SUITE_ARTIFACTS="+dir,
		"E2E_JOB_START="+r.clock.JobStart().UTC().Format(time.RFC3339Nano),
		"E2E_RUN_ID="+r.opts.RunID,
		"E2E_KEEP="+string(r.opts.Keep),
		"E2E_SUITE_WORK="+filepath.Join(r.work, "suites", s.Name),
	)
	return cmd
}

// waitSuite waits for the started suite name to end. On an interrupt (ctx done) it sends the
// suite SIGINT and gives it suiteGrace to clean up and report, then kills its process group.
func (r *run) waitSuite(ctx context.Context, name string, cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		r.logf("suite %s: interrupting (%v); it has %s to clean up and report", name, context.Cause(ctx), suiteGrace)
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case waitErr = <-done:
		case <-time.After(suiteGrace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			waitErr = <-done
			r.fail(verdict.Harness, "suite "+name, fmt.Errorf("did not end within %s of its interrupt; killed", suiteGrace))
		}
	}
	return waitErr
}

// collectSuite checks the one thing the report cannot see: a suite that failed while its
// failures.json says nothing failed. The verdict must never be green by omission; a missing
// failures.json is the report's to judge.
func (r *run) collectSuite(name, dir string, waitErr error) {
	if waitErr == nil {
		return
	}
	failures, err := verdict.ReadFailures(filepath.Join(dir, "failures.json"))
	if err == nil && len(failures) == 0 {
		r.fail(verdict.Harness, "suite "+name, fmt.Errorf("exited (%v) without recording a failure; see suites/%s/output.log", waitErr, name))
	}
}

// suiteDir is the suite's package folder: its lane entry's path as the lane file that names
// it means it (lane.Suite.Dir, as lanes-check and --check read it), else suites/<name> of the
// harness at root.
func suiteDir(root string, s lane.Suite) string {
	if d := s.Dir(); d != "" {
		return d
	}
	return filepath.Join(root, "suites", s.Name)
}

// suiteBinary builds bin/suites/<name>.test with go test -c (incremental) in the suite's
// folder, so a suite in a module of its own builds against its own go.mod; or uses it as it
// is with --no-build.
func (r *run) suiteBinary(ctx context.Context, s lane.Suite) (string, error) {
	name := s.Name
	bin := filepath.Join(r.root, "bin", "suites", name+".test")
	if r.opts.NoBuild {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("suite %s: %s missing; build it (make e2e builds it) or drop --no-build", name, bin)
		}
		return bin, nil
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, ".")
	cmd.Dir = suiteDir(r.root, s)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	if err == nil {
		// The build runs beside the substrate's bring-up, whose phases have ceilings: it
		// yields the CPU to them (the compilers it starts inherit the priority).
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, buildNice)
		err = cmd.Wait()
	}
	if err != nil {
		return "", fmt.Errorf("suite %s: go test -c in %s failed: %v\n%s", name, cmd.Dir, err, out.Bytes())
	}
	r.detailf("suite %s: built in %s", name, time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// build is one suite binary being built while the substrate comes up.
type build struct {
	done  chan struct{}
	bin   string
	err   error
	start time.Time
	took  time.Duration
}

// buildSuites starts building every suite binary of the lane at once, while the substrate
// comes up (a build needs nothing of it); builtSuite waits for one. Each build is a step of
// the timeline (row "suites", stage "build <name>"), drawn on the console as a stage passed,
// with its time.
func (r *run) buildSuites(ctx context.Context) map[string]*build {
	out := map[string]*build{}
	for _, s := range r.lane.Suites {
		b := &build{done: make(chan struct{}), start: time.Now()}
		out[s.Name] = b
		go func() {
			defer close(b.done)
			b.bin, b.err = r.suiteBinary(ctx, s)
			b.took = time.Since(b.start)
			if b.err == nil && !r.opts.NoBuild {
				// One line on the console (the stage passed), a segment of the timeline.
				r.clock.RecordStage(suitesRow, "build "+s.Name, b.start, b.start.Add(b.took))
			}
		}()
	}
	return out
}

// buildNice is the scheduling priority of a suite's build (setpriority(2): 19 is the lowest).
const buildNice = 10

// suitesRow is the timeline row of the suites' builds.
const suitesRow = "suites"

// slowBuild is how long a suite's build may keep the run waiting before the console says so.
const slowBuild = 5 * time.Second

// builtSuite is suite s's binary: its build started with the substrate (buildSuites), waited
// for here, with a line when it keeps the run waiting; built now when none was started.
func (r *run) builtSuite(ctx context.Context, s lane.Suite) (string, error) {
	b, ok := r.builds[s.Name]
	if !ok {
		return r.suiteBinary(ctx, s)
	}
	select {
	case <-b.done:
	case <-time.After(slowBuild):
		r.logf("suite %s: the substrate is up; waiting for its build (%s so far)", s.Name, time.Since(b.start).Round(time.Second))
		<-b.done
	}
	return b.bin, b.err
}
