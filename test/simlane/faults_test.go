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
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/diag"
	"github.com/cozystack/cozy-e2e/internal/report"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

// Bounds of the done criterion (issue 5).
const (
	maxTimeToVerdict = 10 * time.Second
	maxDiagnostics   = 60 * time.Second
	maxArtifacts     = 20 << 20
	// runTimeout bounds one whole run of the sim lane (its job cap is 10m).
	runTimeout = 12 * time.Minute
)

// scenarios are the runs, each an E2E_SIM_FAULT value: green (on the sim lane with its longest
// names: a run id of lane.MaxRunID characters and the longest second cluster name its pools
// allow, longRunID and longNamesLane), then the terminal faults packed
// one to a pool (a run's pools join independently, so three faults cost one run), then the
// faults a correct harness absorbs, together. cluster-dns-mismatch reaches every pool on a
// Kairos class, all of them in the classes cluster, so its run is the one whose faults hit one
// tenant version's cluster and leave the other's clean. mhc-replacement needs the lane copy's
// MachineHealthCheck values (sim.machineHealthCheck), which only the sim's model of #4911
// renders: it targets the pools of the classes cluster, as the real chart renders md0's with
// its own (nodeStartupTimeout 10m, under which nothing is replaced within a run). The Kairos
// faults upstream retries or repairs (bootstrap-transient, providerid-late, machineset-transient)
// share that run: they delay a pool's first Machine, which is the one its health check replaces,
// by 10 to 40 s, well inside its 4-minute pools ceiling. provider-id-missing targets the Talos
// pool: on a Kairos pool it is no final state (its provider may patch the providerID on), and it
// would end only at the deadline.
var scenarios = []string{
	"green",
	// A fault in one version's cluster alone: the classes cluster (v1.35) goes red, the pools
	// cluster (md0, v1.34) must stay clean (checkClusters).
	"cluster-dns-mismatch",
	"provider-id-missing@md0,vmi-unschedulable@kairos,guest-join-rejected@acme",
	"disk-import-refused@md0,node-tainted@acme,kairos-config-refused@kairos",
	"mhc-replacement@kairos,mhc-replacement@acme,apiserver-transient,bootstrap-transient@kairos,providerid-late@kairos,machineset-transient@acme,disk-import-oom@md0,vmi-crash-once@md0",
	// A VM-layer fault the Talos pool alone holds: the other pools stay clean.
	"vmi-crashloop@md0",
}

// lifecycleScenarios run on lanes/sim-lifecycle.yaml: green, then the lifecycle faults, each
// on a copy of the lane whose label filter runs the joins and only the lifecycle specs its faults
// target (a red run is kept, and a kept run deletes nothing, so leak runs with the deletion
// alone). A run costs a bring-up and the specs it runs: remediation waits out the silent Node's
// grace period and the MachineHealthCheck's Ready=Unknown timeout (80 s of the sim's timers).
var lifecycleScenarios = []lifecycleScenario{
	{"green", ""},
	{"mhc-blocked@remed,scale-down-stuck@scale", "!refusals && !rollout && !deletion"},
	{"leak", "!refusals && !remediation && !scaling && !rollout"},
}

// lifecycleScenario is faults (an E2E_SIM_FAULT value, or green) on the lifecycle lane, its
// label filter replaced by filter when set.
type lifecycleScenario struct{ faults, filter string }

// lifecyclePrefix marks a lifecycle scenario in E2E_FAULTS ("lifecycle:leak").
const lifecyclePrefix = "lifecycle:"

// maxGreenLifecycleLines bounds what a green run of the lifecycle lane prints: three pools'
// joins, then each lifecycle spec's stages and its heartbeats.
const maxGreenLifecycleLines = 80

// deadlineScenario holds the faults that end at a phase's ceiling, not within seconds of
// showing: a stalled import and a Node that never turns Ready. It runs on a copy of the sim
// lane whose pools ceiling is deadlineCeiling, and every pool carries one of them, so no pool
// has to join within the shorter ceiling. A deadline failure must be decided within
// maxDeadlineOverrun of the pools phase's deadline, and not before it.
const (
	deadlineScenario   = "guest-join-rejected@md0,disk-import-stall@kairos,node-not-ready@acme"
	deadlineCeiling    = 60 * time.Second
	maxDeadlineOverrun = 10 * time.Second
)

// The mhc-replacement fault runs on a copy of the sim lane whose MachineHealthChecks replace a
// Machine without a Node after mhcStartupTimeout, whatever share of the pool is unhealthy: the
// sim lane renders the pinned chart's values (nodeStartupTimeout 10m, maxUnhealthy 50%), under
// which nothing is replaced within a run. mhcStartupTimeout is longer than a healthy Machine
// takes to its Node on a loaded machine (the real CAPK looks at a new VM again after 20 s), and
// the copy's pools ceiling leaves the replacement time to join.
const (
	mhcStartupTimeout = 90 * time.Second
	mhcPoolsCeiling   = 4 * time.Minute
)

type outcome struct {
	name     string
	result   verdict.Result
	failures int
	// timeToVerdict is the latest failure's delay after its fault became observable, or,
	// for deadline faults, after the pools phase's deadline.
	timeToVerdict time.Duration
	// slowest is the fault whose verdict took timeToVerdict, as fault@pool.
	slowest     string
	diagnostics time.Duration
	artifacts   int64
	wall        time.Duration
	// art is the run's artifacts folder.
	art string
}

// decided records that the verdict on fault took d after it became observable (or after the
// pools deadline), keeping the slowest.
func (o *outcome) decided(fault string, d time.Duration) {
	if o.slowest == "" || d > o.timeToVerdict {
		o.timeToVerdict, o.slowest = max(d, 0), fault
	}
}

// longRunID is the run id of the green run: as long as a run id may be.
var longRunID = strings.Repeat("z", lane.MaxRunID)

// checkLongNames: the green run with the longest names brought up both conformance clusters
// under their full names, and a pool of each joined there (each cluster's tree and tenant
// stream are in the artifacts).
func checkLongNames(t *testing.T, cluster string, o outcome) {
	t.Helper()
	for _, c := range []string{lane.DefaultCluster, cluster} {
		tree := filepath.Join(o.art, "clusters", "management", "cluster-tree-kubernetes-"+c+"-"+longRunID+".txt")
		if _, err := os.Stat(tree); err != nil {
			t.Errorf("cluster %s-%s: no tree of it in the artifacts: %v", c, longRunID, err)
		}
	}
	if _, err := os.Stat(filepath.Join(o.art, "clusters", "tenant-"+cluster, "events.jsonl")); err != nil {
		t.Errorf("cluster %s: its tenant cluster was not streamed: %v", cluster, err)
	}
}

func TestSimLaneUnderEachFault(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole sim lane once per fault, minutes each; run without -short")
	}
	root := projectRoot(t)
	l, err := lane.Load(filepath.Join(root, "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ll, err := lane.Load(filepath.Join(root, "lanes", "sim-lifecycle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildOrchestrator(t, root)
	long, longCluster := longNamesLane(t, root)
	short := shortPoolsLane(t, root, deadlineCeiling)
	mhc := mhcLane(t, root, mhcStartupTimeout, mhcPoolsCeiling)
	runs := append(append([]string{}, scenarios...), deadlineScenario)
	for _, ls := range lifecycleScenarios {
		runs = append(runs, lifecyclePrefix+ls.faults)
	}
	runs = append(runs, suiteRuns(t, root)...)
	if only := os.Getenv("E2E_FAULTS"); only != "" {
		runs = strings.Split(only, ";")
	}
	var table []outcome
	for _, name := range runs {
		t.Run(name, func(t *testing.T) {
			if strings.HasPrefix(name, suitePrefix) {
				table = append(table, runSuiteScenario(t, root, bin, name))
				return
			}
			if spec, ok := strings.CutPrefix(name, lifecyclePrefix); ok {
				filter := ""
				for _, ls := range lifecycleScenarios {
					if ls.faults == spec {
						filter = ls.filter
					}
				}
				laneArg := "sim-lifecycle"
				if filter != "" {
					laneArg = filteredLane(t, root, "sim-lifecycle", filter)
				}
				table = append(table, runLane(t, root, bin, ll, laneArg, spec))
				return
			}
			if name == "green" {
				o := runLane(t, root, bin, l, long, name, "E2E_RUN_ID="+longRunID)
				checkLongNames(t, longCluster, o)
				table = append(table, o)
				return
			}
			laneArg := "sim"
			if set, err := faults.Parse(name); err == nil {
				switch {
				case deadlines(poolFaults(l, set)):
					laneArg = short
				case set.Selected(faults.MHCReplacement):
					laneArg = mhc
				}
			}
			table = append(table, runLane(t, root, bin, l, laneArg, name))
		})
	}
	t.Log("\nresult      failures  time-to-verdict  diagnostics  artifacts   wall  run (slowest verdict)")
	for _, o := range table {
		slowest := ""
		if o.slowest != "" {
			slowest = " (" + o.slowest + ")"
		}
		t.Logf("%-11s %8d  %15s  %11s  %7.2fMB  %5s  %s%s", o.result, o.failures, o.timeToVerdict.Round(10*time.Millisecond),
			o.diagnostics.Round(10*time.Millisecond), float64(o.artifacts)/(1<<20), o.wall.Round(time.Second), o.name, slowest)
	}
}

// The scenarios exercise every fault of the catalogue, a run's judged faults never share a
// pool, the absorbed ones never share a run with one that fails (which would hide whether they
// pass) and each has a proof that it fired, and the faults judged at a ceiling run alone in
// deadlineScenario with one on each pool.
func TestScenariosCoverTheCatalogue(t *testing.T) {
	l, err := lane.Load(filepath.Join(projectRoot(t), "lanes", "sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ll, err := lane.Load(filepath.Join(projectRoot(t), "lanes", "sim-lifecycle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[faults.Name]bool{}
	for _, ls := range lifecycleScenarios[1:] {
		set, err := faults.Parse(ls.faults)
		if err != nil {
			t.Fatal(err)
		}
		targets := poolFaults(ll, set)
		for _, n := range set.Names() {
			covered[n] = true
		}
		for pool, fs := range targets {
			if len(fs) > 1 {
				t.Errorf("lifecycle scenario %q: pool %s carries %d judged faults; one pool, one fault", ls.faults, pool, len(fs))
			}
		}
		if len(targets) == 0 && len(tenantFaults(set)) == 0 {
			t.Errorf("lifecycle scenario %q targets nothing of the lifecycle lane", ls.faults)
		}
	}
	for _, spec := range append(append([]string{}, scenarios[1:]...), deadlineScenario) {
		set, err := faults.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		targets := poolFaults(l, set)
		if deadlines(targets) != (spec == deadlineScenario) {
			t.Errorf("scenario %q: the faults that end at a ceiling belong in deadlineScenario, alone", spec)
		}
		if spec == deadlineScenario && len(targets) != len(l.Pools) {
			t.Errorf("deadlineScenario %q leaves a pool without a fault; that pool would have to join within %s", spec, deadlineCeiling)
		}
		absorbed := 0
		for _, n := range set.Names() {
			covered[n] = true
			if f, _ := faults.Lookup(n); f.Passes {
				absorbed++
			}
		}
		if absorbed > 0 && len(targets) > 0 {
			t.Errorf("scenario %q mixes faults that pass with faults that fail", spec)
		}
		for pool, fs := range targets {
			if len(fs) > 1 {
				t.Errorf("scenario %q: pool %s carries %d judged faults; one pool, one fault", spec, pool, len(fs))
			}
		}
		if absorbed == 0 && len(targets) == 0 {
			t.Errorf("scenario %q targets no pool of the sim lane", spec)
		}
	}
	bySuite := map[faults.Name]bool{}
	for _, sc := range suiteScenarios(t, projectRoot(t)) {
		for _, e := range sc.Expect {
			covered[e.Fault], bySuite[e.Fault] = true, true
		}
	}
	for _, f := range faults.Catalogue() {
		if bySuite[f.Name] {
			continue // judged by its suite's data (examples/*/faults.yaml)
		}
		if !covered[f.Name] {
			t.Errorf("no scenario exercises %s", f.Name)
		}
		_, judged := expect(f.Name, osfamily.Talos)
		if judged == f.Passes {
			t.Errorf("%s: the catalogue says passes=%v, but test/simlane expects a verdict=%v", f.Name, f.Passes, judged)
		}
		if _, proof := fired[f.Name]; proof != f.Passes {
			t.Errorf("%s: passes=%v, but a proof that it fired is %v: every absorbed fault, and only those, needs one in fired", f.Name, f.Passes, proof)
		}
	}
}

// The lane copies load (the long-names one with a longer cluster name), and the mhc copy carries its MachineHealthCheck values and a job cap
// its longer pools ceiling fits in.
func TestLaneCopies(t *testing.T) {
	root := projectRoot(t)
	if _, err := lane.Load(shortPoolsLane(t, root, deadlineCeiling)); err != nil {
		t.Fatal(err)
	}
	if _, name := longNamesLane(t, root); len(name) <= len("classes") {
		t.Fatalf("sim-long-names: cluster %q is no longer than the sim lane's", name)
	}
	l, err := lane.Load(mhcLane(t, root, mhcStartupTimeout, mhcPoolsCeiling))
	if err != nil {
		t.Fatal(err)
	}
	if m := l.Sim.MachineHealthCheck; m == nil || m.MaxUnhealthy != "100%" || m.NodeStartupTimeout.D() != mhcStartupTimeout {
		t.Fatalf("sim-mhc: machineHealthCheck %+v", l.Sim.MachineHealthCheck)
	}
}

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
	case <-time.After(runTimeout):
		_ = cmd.Process.Kill()
		werr = <-done
		t.Errorf("the run took more than %s", runTimeout)
	}
	out.wall = time.Since(start)
	red := set != nil && (len(poolFaults(l, set)) > 0 || len(tenantFaults(set)) > 0)
	if kept != red {
		t.Errorf("E2E_KEEP=on-failure: kept %v, want it kept only when the run fails", kept)
	}
	maxLines := maxGreenLines
	if l.Name != "sim" {
		maxLines = maxGreenLifecycleLines
	}
	checkConsole(t, log.String(), spec, red, maxLines)
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
			if judged && !e.tenant && set.Active(n, p.Name, oses[p.Class] == osfamily.Kairos) {
				out[p.Name] = append(out[p.Name], judgedFault{n, e})
			}
		}
	}
	return out
}

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
		if got.Class != f.class || got.Stage != string(f.stage) {
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
