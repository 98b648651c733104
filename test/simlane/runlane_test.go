package simlane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
	"github.com/cozystack/cozy-e2e/internal/progress"
	"github.com/cozystack/cozy-e2e/internal/report"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

// runLane runs laneArg (a lane's name, or a lane file derived from l: the short copy for the
// faults that end at a ceiling, the mhc copy for mhc-replacement, a filtered lifecycle lane)
// under the faults of spec and checks the run against l's pools.
func runLane(t *testing.T, root, bin string, l *lane.Lane, laneArg, spec string, env ...string) outcome {
	out := outcome{name: spec}
	if l.Name != "sim" {
		out.name = l.Name + ": " + spec
	}
	var set *faults.Set
	if spec != "green" {
		var err error
		if set, err = faults.Parse(spec); err != nil {
			t.Fatalf("E2E_FAULTS: %v", err)
		}
	}
	slug := strings.NewReplacer(",", "+", "@", "_").Replace(spec)
	art := filepath.Join(t.TempDir(), "artifacts")
	if keep := os.Getenv("E2E_FAULT_ARTIFACTS"); keep != "" {
		art = filepath.Join(keep, slug)
		if err := os.RemoveAll(art); err != nil {
			t.Fatal(err)
		}
	}
	tag := strings.NewReplacer(",", "", "@", "", "-", "").Replace(spec)
	canary := fmt.Sprintf("canary-%d-%s", time.Now().UnixNano(), tag[:min(len(tag), 64)]) // E2E_SIM_CANARY holds at most 128
	fault := ""
	if set != nil {
		fault = spec
	}
	// Every run keeps a red run (E2E_KEEP=on-failure): a green one must end by itself, a red one
	// stays up, is looked at (checkKept) and ended with SIGINT.
	out.art = art
	cmd := laneCommand(root, bin, laneArg, append([]string{"E2E_ARTIFACTS=" + art, "E2E_SIM_CANARY=" + canary, "E2E_SIM_FAULT=" + fault, "E2E_KEEP=on-failure"}, env...)...)
	log := &watchedLog{marker: keptMarker, seen: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var werr error
	kept := false
	select {
	case werr = <-done:
	case <-log.seen:
		kept = true
		checkKept(t, art, log.String(), len(tenantFaults(set)) > 0)
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case werr = <-done:
		case <-time.After(maxInterrupted):
			_ = cmd.Process.Kill()
			werr = <-done
			t.Errorf("a kept run did not end within %s of SIGINT", maxInterrupted)
		}
		checkKeptRemoved(t, log.String())
	case <-time.After(runTimeout(l)):
		_ = cmd.Process.Kill()
		werr = <-done
		t.Errorf("the run took more than lane %s's budget.jobCap %s: a CI runner would have cancelled it without a verdict", l.Name, runTimeout(l))
	}
	out.wall = time.Since(start)
	red := set != nil && (len(poolFaults(l, set)) > 0 || len(tenantFaults(set)) > 0)
	if kept != red {
		t.Errorf("E2E_KEEP=on-failure: kept %v, want it kept only when the run fails", kept)
	}
	bound := consoleBound{lines: maxGreenLines}
	if l.Name != "sim" {
		bound = consoleBound{lines: maxGreenLifecycleLines, heartbeatsFree: true}
	}
	// A pool whose first Machine the MachineHealthCheck replaces waits out mhcStartupTimeout
	// before its replacement exists, and the console repeats its state every heartbeat meanwhile.
	oses := osOf(l)
	for _, p := range l.Pools {
		if set.Active(faults.MHCReplacement, p.Name, oses[p.Class] == osfamily.Kairos) {
			bound.lines += int(mhcStartupTimeout / progress.DefaultHeartbeat)
		}
	}
	checkConsole(t, log.String(), spec, red, bound)
	checkReports(t, l, art)
	code := exitCode(werr)
	v, err := verdict.ReadVerdict(filepath.Join(art, "verdict.json"))
	if err != nil {
		t.Fatalf("no verdict (exit %d): %v\n%s", code, err, tail(log.String(), 60))
	}
	out.result, out.failures = v.Result, len(v.Failures)
	checkClusters(t, l, poolFaults(l, set), v)
	if v.ExitCode != code {
		t.Errorf("verdict.json says exit %d, the run exited %d", v.ExitCode, code)
	}
	if targets := poolFaults(l, set); len(targets) > 0 || len(tenantFaults(set)) > 0 {
		checkFaults(t, l, targets, tenantFaults(set), v, art, &out)
		if set.Selected(faults.DiskImportRefused) {
			checkPreviousLog(t, art, "401")
		}
	} else if v.Result != verdict.Pass {
		t.Errorf("%s: result %s, want pass: %s\n%s", spec, v.Result, v.Reason, tail(log.String(), 40))
	}
	if set != nil {
		checkTolerated(t, l, set, art)
	}
	if err := diag.Scan(art, canary); err != nil {
		t.Errorf("canary: %v", err)
	}
	out.diagnostics = diagnosticsSpan(t, art)
	if out.diagnostics > maxDiagnostics {
		t.Errorf("the on-failure diagnostics took %s, more than %s", out.diagnostics, maxDiagnostics)
	}
	size, _, err := report.Size(art)
	if err != nil {
		t.Fatal(err)
	}
	out.artifacts = size
	if size > maxArtifacts {
		t.Errorf("the artifacts hold %d bytes, more than %d", size, maxArtifacts)
	}
	if t.Failed() {
		t.Logf("run output:\n%s", tail(log.String(), 80))
	}
	return out
}

// judgedFault is a fault that targets a pool, with the verdict it must bring there.
type judgedFault struct {
	name faults.Name
	expectation
}

// poolFaults lists, for each pool of l, the faults of set that target it, with what each must
// bring about on a pool of that pool's OS family.
func poolFaults(l *lane.Lane, set *faults.Set) map[string][]judgedFault {
	oses := osOf(l)
	out := map[string][]judgedFault{}
	for _, p := range l.Pools {
		for _, n := range set.Names() {
			e, judged := expect(n, oses[p.Class])
			// A platform fault names a controller, not a pool: every pool stands on it.
			if judged && !e.tenant && (set.Active(n, p.Name, oses[p.Class] == osfamily.Kairos) || platformFault(n)) {
				out[p.Name] = append(out[p.Name], judgedFault{n, e})
			}
		}
	}
	return out
}

// before reports whether stage got comes before want in a join: a platform fault stops every
// pool wherever it stood when the component went down, which a slow machine may leave short of
// the stage the fault itself holds (the pool's failure still names the component).
func before(got string, want join.Stage) bool {
	for _, st := range join.Stages() {
		switch string(st) {
		case got:
			return true
		case string(want):
			return false
		}
	}
	return false
}

// platformFault: a fault of a platform controller under every pool (controller-crashloop).
func platformFault(n faults.Name) bool { return n == faults.ControllerCrashLoop }

// tenantFaults are the faults of set that fail the tenant's deletion rather than a pool.
func tenantFaults(set *faults.Set) []judgedFault {
	var out []judgedFault
	for _, n := range set.Names() {
		if e, judged := expect(n, osfamily.Talos); judged && e.tenant {
			out = append(out, judgedFault{n, e})
		}
	}
	return out
}

// deadlines reports whether some targeted pool must end at the pools phase's ceiling.
func deadlines(targets map[string][]judgedFault) bool {
	for _, fs := range targets {
		for _, f := range fs {
			if !f.terminal {
				return true
			}
		}
	}
	return false
}

// checkFaults holds the verdict of a run under judged faults to their expectations, for every
// pool: a targeted pool fails with its fault's class and stage, the others do not fail; a
// tenant's fault fails the tenant's deletion, and nothing else fails outside a pool.
func checkFaults(t *testing.T, l *lane.Lane, targets map[string][]judgedFault, tenant []judgedFault, v verdict.Verdict, art string, out *outcome) {
	t.Helper()
	obs := observations(t, art)
	if v.Result != verdict.Fail || v.ExitCode != verdict.ExitFail {
		t.Errorf("result %s exit %d, want fail 1: %s", v.Result, v.ExitCode, v.Reason)
	}
	// A pool's fault fails that pool, never the run around it (bring-up, teardown, harness).
	var outside []verdict.Failure
	for _, x := range v.Failures {
		if x.Pool == "" {
			outside = append(outside, x)
		}
	}
	if len(tenant) == 0 {
		for _, x := range outside {
			t.Errorf("a failure outside any pool: %s", x.Line())
		}
	}
	for _, f := range tenant {
		if len(outside) != 1 {
			t.Errorf("%s: %d failures outside a pool, want the tenant's deletion alone: %v", f.name, len(outside), outside)
			continue
		}
		got := outside[0]
		if got.Class != f.class || got.Stage != string(f.stage) {
			t.Errorf("the tenant: %s at %s, want %s at %s for %s (%s)", got.Class, got.Stage, f.class, f.stage, f.name, got.Message)
		}
		if at, ok := firstObservation(obs, f.name, ""); !ok {
			t.Errorf("the sim recorded no observation of %s (faults-observed.jsonl)", f.name)
		} else {
			d := got.At.Sub(at)
			out.decided(string(f.name), d)
			t.Logf("the tenant: %s at %s decided %s after the fault became observable", got.Class, got.Stage, d.Round(time.Millisecond))
			if d > maxTimeToVerdict {
				t.Errorf("the tenant: verdict %s after the fault became observable, more than %s", d, maxTimeToVerdict)
			}
		}
		checkEvidence(t, f, got, art)
	}
	for _, p := range l.Pools {
		var mine []verdict.Failure
		for _, x := range v.Failures {
			if x.Pool == p.Name {
				mine = append(mine, x)
			}
		}
		if len(targets[p.Name]) == 0 {
			if len(mine) > 0 {
				t.Errorf("pool %s is targeted by no fault but failed: %s", p.Name, mine[0].Line())
			}
			continue
		}
		f := targets[p.Name][0]
		if len(mine) == 0 {
			t.Errorf("pool %s: no failure; want %s at %s (%s)", p.Name, f.class, f.stage, f.name)
			continue
		}
		got := mine[0]
		if got.Class != f.class || (got.Stage != string(f.stage) && !(f.class == verdict.Platform && before(got.Stage, f.stage))) {
			t.Errorf("pool %s: %s at %s, want %s at %s for %s (%s)", p.Name, got.Class, got.Stage, f.class, f.stage, f.name, got.Message)
		}
		if !f.terminal {
			checkAtDeadline(t, art, p.Name, got, out)
			checkEvidence(t, f, got, art)
			continue
		}
		at, ok := firstObservation(obs, f.name, p.Name)
		if n, many := decisiveObservation[f.name]; many {
			at, ok = nthObservation(obs, f.name, p.Name, n)
		}
		if !ok {
			t.Errorf("pool %s: the sim recorded no observation of %s (faults-observed.jsonl)", p.Name, f.name)
		} else {
			d := got.At.Sub(at)
			out.decided(string(f.name)+"@"+p.Name, d)
			t.Logf("pool %s: %s at %s decided %s after the fault became observable", p.Name, got.Class, got.Stage, d.Round(time.Millisecond))
			if d > maxTimeToVerdict {
				t.Errorf("pool %s: verdict %s after the fault became observable, more than %s", p.Name, d, maxTimeToVerdict)
			}
		}
		checkEvidence(t, f, got, art)
	}
}

// checkEvidence: every evidence path exists, and one of them shows the cause.
func checkEvidence(t *testing.T, f judgedFault, x verdict.Failure, art string) {
	t.Helper()
	if len(x.Evidence) == 0 {
		t.Errorf("pool %s: the failure names no evidence", x.Pool)
		return
	}
	shown := false
	for _, p := range x.Evidence {
		data, err := os.ReadFile(filepath.Join(art, filepath.FromSlash(p)))
		if err != nil {
			if info, serr := os.Stat(filepath.Join(art, p)); serr == nil && info.IsDir() {
				continue
			}
			t.Errorf("pool %s: evidence %s: %v", x.Pool, p, err)
			continue
		}
		for _, want := range f.explains {
			if want == "console" {
				shown = shown || strings.Contains(p, "/consoles/") && consoleLines(data) > 0
			} else if bytes.Contains(data, []byte(want)) {
				shown = true
			}
		}
	}
	if !shown {
		t.Errorf("pool %s: no evidence file shows %v; evidence: %v", x.Pool, f.explains, x.Evidence)
	}
}

// checkAtDeadline: a deadline failure is decided when the pools phase runs out, within
// maxDeadlineOverrun after its deadline and never before it (which would mean the harness
// gave up early, or judged a stuck pool as something else).
func checkAtDeadline(t *testing.T, art, pool string, x verdict.Failure, out *outcome) {
	t.Helper()
	tm, err := budget.ReadTimings(filepath.Join(art, "timings.json"))
	if err != nil {
		t.Errorf("timings.json: %v", err)
		return
	}
	for _, p := range tm.Phases {
		if p.Name != "pools" {
			continue
		}
		d := x.At.Sub(p.Deadline)
		out.decided("deadline@"+pool, d)
		t.Logf("pool %s: %s at %s decided %s after the pools deadline", pool, x.Class, x.Stage, d.Round(time.Millisecond))
		if d < -time.Second || d > maxDeadlineOverrun {
			t.Errorf("pool %s: deadline failure decided %s after the pools phase's deadline; want within [-1s, %s]", pool, d, maxDeadlineOverrun)
		}
		return
	}
	t.Errorf("timings.json has no pools phase")
}
