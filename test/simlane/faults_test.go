package simlane

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

// Bounds of the done criterion (issue 5).
const (
	maxTimeToVerdict = 10 * time.Second
	maxDiagnostics   = 60 * time.Second
	maxArtifacts     = 20 << 20
	// interruptTimeout bounds a sim lane run that is to be interrupted before its end.
	interruptTimeout = 12 * time.Minute
)

// runTimeout bounds one whole run of lane l: its CI job's timeout-minutes (budget.jobCap), before
// which the harness promises to end with a verdict; a run still going then would be cancelled by
// the CI runner without one.
func runTimeout(l *lane.Lane) time.Duration { return l.Budget.JobCap.D() }

// scenarios are the runs, each an E2E_SIM_FAULT value: green (on the sim lane with its longest
// names: a run id of lane.MaxRunID characters and the longest second cluster name its pools
// allow, longRunID and longNamesLane; and an outside hand deletes a worker's VMI once while the
// pools join, which the real VM controller repairs: outsideHand), then the terminal faults packed
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
	"provider-id-missing@md0,vmi-unschedulable@kairos",
	"disk-import-refused@md0,node-tainted@acme,kairos-config-refused@kairos",
	"mhc-replacement@kairos,mhc-replacement@acme,apiserver-transient,bootstrap-transient@kairos,providerid-late@kairos,machineset-transient@acme,disk-import-oom@md0,vmi-crash-once@md0",
	// Three controllers killed once mid-pools (issue 35): each is restarted as a kubelet would,
	// the run passes and shows each restart.
	"controller-killed@virt-controller,controller-killed@cdi-controller,controller-killed@capk",
}

// platformScenario crash-loops virt-controller from the first VirtualMachine on: every pool
// stands still until the pools deadline and must fail with the platform's class, naming
// virt-controller and its last log line (not deadline). It runs on the short-pools lane copy,
// as deadlineScenario does.
const platformScenario = "controller-crashloop@virt-controller"

// lifecycleScenarios run on lanes/sim-lifecycle.yaml: green, then the lifecycle faults, each
// on a copy of the lane whose label filter runs the joins and only the lifecycle specs its faults
// target (a red run is kept, and a kept run deletes nothing, so leak runs with the deletion
// alone). A run costs a bring-up and the specs it runs: remediation waits out the silent Node's
// grace period and the MachineHealthCheck's Ready=Unknown timeout (80 s of the sim's timers).
// The pool the lifecycle faults leave idle (roll, whose rollout that run filters out) holds a
// join fault of the VM layer, vmi-crashloop, which would otherwise cost a sim run of its own: it
// is decided at the join, long before the other pools' lifecycle specs end, and the other pools
// must stay clean of it.
var lifecycleScenarios = []lifecycleScenario{
	{"green", ""},
	{"mhc-blocked@remed,scale-down-stuck@scale,vmi-crashloop@roll", "!refusals && !rollout && !deletion"},
	{"leak", "!refusals && !remediation && !scaling && !rollout"},
}

// lifecycleScenario is faults (an E2E_SIM_FAULT value, or green) on the lifecycle lane, its
// label filter replaced by filter when set.
type lifecycleScenario struct{ faults, filter string }

// lifecyclePrefix marks a lifecycle scenario in E2E_FAULTS ("lifecycle:leak").
const lifecyclePrefix = "lifecycle:"

// maxGreenLifecycleLines bounds what a green run of the lifecycle lane prints besides its
// heartbeats: a line per stage each of the lifecycle pools passes and a line per phase (69 in a
// green run under make test's load, 26 heartbeats beside them in its 15 minutes), with room for
// the lines a suite's build or a slow phase adds.
const maxGreenLifecycleLines = 80

// deadlineScenario holds the faults that end at a phase's ceiling, not within seconds of
// showing: a Node that never turns Ready, a stalled import, and a Kairos guest whose kubeadm
// join keeps failing (a suspect: its provider joins again 10 s after each failure; the Talos
// variant of the fault ends at a ceiling too, and the sim's guest tests hold it). It runs on a copy of the sim
// lane whose pools ceiling is deadlineCeiling, and every pool carries one of them, so no pool
// has to join within the shorter ceiling. The ceiling leaves each pool time to reach the stage
// its fault holds it at on a loaded machine (at load 12, 60 s left a Talos pool's second worker
// still booting). A deadline failure must be decided within maxDeadlineOverrun of the pools
// phase's deadline, and not before it.
const (
	deadlineScenario   = "node-not-ready@md0,disk-import-stall@kairos,guest-join-rejected@acme"
	deadlineCeiling    = 90 * time.Second
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
	runs := append(append([]string{}, scenarios...), deadlineScenario, platformScenario)
	for _, ls := range lifecycleScenarios {
		runs = append(runs, lifecyclePrefix+ls.faults)
	}
	runs = append(runs, suiteRuns(t, root)...)
	if only := os.Getenv("E2E_FAULTS"); only != "" {
		runs = strings.Split(only, ";")
	}
	// scenario runs one of runs and returns its outcome.
	scenario := func(t *testing.T, name string) outcome {
		if strings.HasPrefix(name, suitePrefix) {
			return runSuiteScenario(t, root, bin, name)
		}
		if spec, ok := strings.CutPrefix(name, lifecyclePrefix); ok {
			laneArg := "sim-lifecycle"
			for _, ls := range lifecycleScenarios {
				if ls.faults == spec && ls.filter != "" {
					laneArg = filteredLane(t, root, "sim-lifecycle", ls.filter)
				}
			}
			return runLane(t, root, bin, ll, laneArg, spec)
		}
		if name == "green" {
			hand := startOutsideHand(t)
			o := runLane(t, root, bin, l, long, name, "E2E_RUN_ID="+longRunID, hand.env())
			hand.check(t, o)
			checkLongNames(t, longCluster, o)
			return o
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
		return runLane(t, root, bin, l, laneArg, name)
	}
	// Two streams of runs, side by side, each one world at a time: the lifecycle lane's runs
	// (mostly waits on the product's timers: a Node's grace period, a health check's timeout, the
	// chart's upgrades) beside the sim lane's and the suites'.
	streams := map[string][]string{}
	for _, name := range runs {
		s := "sim"
		if strings.HasPrefix(name, lifecyclePrefix) {
			s = "lifecycle"
		}
		streams[s] = append(streams[s], name)
	}
	var mu sync.Mutex
	byRun := map[string]outcome{}
	t.Run("streams", func(t *testing.T) {
		for _, s := range []string{"sim", "lifecycle"} {
			if len(streams[s]) == 0 {
				continue
			}
			t.Run(s, func(t *testing.T) {
				t.Parallel()
				for _, name := range streams[s] {
					t.Run(name, func(t *testing.T) {
						o := scenario(t, name)
						mu.Lock()
						defer mu.Unlock()
						byRun[name] = o
					})
				}
			})
		}
	})
	var table []outcome
	for _, name := range runs {
		if o, ok := byRun[name]; ok {
			table = append(table, o)
		}
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
	for _, spec := range append(append([]string{}, scenarios[1:]...), deadlineScenario, platformScenario) {
		set, err := faults.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		targets := poolFaults(l, set)
		if deadlines(targets) != (spec == deadlineScenario || spec == platformScenario) {
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
		if faults.RealNodeOnly(f.Name) {
			checkRealNodeCoverage(t, f)
			continue
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

// checkRealNodeCoverage: a fault of the real Node's lane runs there: an absorbed one in its green
// run (realNodeGreenFaults) with a proof that it fired, one a correct harness fails in
// guestFaultsScenario with the verdict it must bring.
func checkRealNodeCoverage(t *testing.T, f faults.Fault) {
	t.Helper()
	green, err := faults.Parse(realNodeGreenFaults)
	if err != nil {
		t.Fatal(err)
	}
	red, err := faults.Parse(guestFaultsScenario)
	if err != nil {
		t.Fatal(err)
	}
	_, judged := expect(f.Name, osfamily.Talos)
	_, proof := fired[f.Name]
	switch {
	case f.Passes && !(green.Selected(f.Name) && proof && !judged):
		t.Errorf("%s passes: it belongs in realNodeGreenFaults (%v) with a proof in fired (%v) and no verdict (%v)", f.Name, green.Selected(f.Name), proof, judged)
	case !f.Passes && !(red.Selected(f.Name) && judged):
		t.Errorf("%s fails a pool: it belongs in guestFaultsScenario (%v) with a verdict in expect (%v)", f.Name, red.Selected(f.Name), judged)
	}
}
