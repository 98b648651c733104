package simlane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/report"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// A suite of its own says, as data beside it (examples/*/faults.yaml), what a fault must make
// of its specs: the lane it runs on, the faults, and per targeted pool the class, stage and a
// text its evidence shows. Each scenario runs once, under its faults: the suite's cases of the
// pools no fault targets must pass in that run (the suite's junit.xml, a case per pool named
// "pool <name> ..."), which is what a green run of the lane would show of them. A scenario
// with green: true (no faults, no expect) is a run without a fault: it passes, every pool's
// cases passed.
type suiteScenario struct {
	Lane   string         `yaml:"lane"` // a lane file, from the checkout
	Suite  string         `yaml:"suite"`
	Green  bool           `yaml:"green"`
	Faults string         `yaml:"faults"` // an E2E_SIM_FAULT value
	Expect []suiteOutcome `yaml:"expect"`
}

// name is the scenario's E2E_FAULTS value after suite:<lane name>: its faults, or green.
func (s suiteScenario) name() string {
	if s.Green {
		return "green"
	}
	return s.Faults
}

type suiteOutcome struct {
	Fault faults.Name   `yaml:"fault"`
	Pool  string        `yaml:"pool"`
	Class verdict.Class `yaml:"class"`
	Stage string        `yaml:"stage"`
	// Explains is a text one of the failure's evidence files holds; Evidence the name of a
	// file that must be among its evidence (what shows a label missing is the Node without it).
	Explains string `yaml:"explains"`
	Evidence string `yaml:"evidence"`
	// Spec is a text the failure's spec must hold (an e2e-framework feature's name).
	Spec string `yaml:"spec"`
}

// suitePrefix marks a suite scenario in E2E_FAULTS: suite:<lane name>:<faults>.
const suitePrefix = "suite:"

// suiteScenarios reads every examples/*/faults.yaml.
func suiteScenarios(t *testing.T, root string) []suiteScenario {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(root, "examples", "*", "faults.yaml"))
	var out []suiteScenario
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var list []suiteScenario
		if err := yaml.Unmarshal(data, &list); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for i, s := range list {
			if s.Green {
				if s.Lane == "" || s.Suite == "" || s.Faults != "" || len(s.Expect) > 0 {
					t.Fatalf("%s: [%d]: a green scenario has a lane and a suite, and no faults or expect", p, i)
				}
				continue
			}
			if _, err := faults.Parse(s.Faults); err != nil || s.Lane == "" || s.Suite == "" || len(s.Expect) == 0 {
				t.Fatalf("%s: [%d]: lane, suite, faults and expect are each required (%v)", p, i, err)
			}
			for j, e := range s.Expect {
				if e.Explains == "" && e.Evidence == "" {
					t.Fatalf("%s: [%d].expect[%d]: say what shows the cause (explains, evidence)", p, i, j)
				}
			}
		}
		out = append(out, list...)
	}
	return out
}

// suiteRuns are the E2E_FAULTS names of the suite scenarios, one run each.
func suiteRuns(t *testing.T, root string) []string {
	var runs []string
	for _, s := range suiteScenarios(t, root) {
		runs = append(runs, suitePrefix+laneName(s.Lane)+":"+s.name())
	}
	return runs
}

func laneName(file string) string { return strings.TrimSuffix(filepath.Base(file), ".yaml") }

// runSuiteScenario runs one suite scenario named by run (suitePrefix...) under its faults: each
// expected pool fails with its class at its stage within maxTimeToVerdict of the fault's
// observation, with evidence that shows the cause; no other pool fails, and the suite's cases
// of the other pools pass.
func runSuiteScenario(t *testing.T, root, bin, run string) outcome {
	name, spec, _ := strings.Cut(strings.TrimPrefix(run, suitePrefix), ":")
	var sc *suiteScenario
	for _, s := range suiteScenarios(t, root) {
		if laneName(s.Lane) == name && s.name() == spec {
			sc = &s
			break
		}
	}
	if sc == nil {
		t.Fatalf("no suite scenario %q in examples/*/faults.yaml", run)
	}
	l, err := lane.Load(filepath.Join(root, filepath.FromSlash(sc.Lane)))
	if err != nil {
		t.Fatal(err)
	}
	out := outcome{name: run, art: filepath.Join(t.TempDir(), "artifacts")}
	fault := spec
	if sc.Green {
		fault = ""
	}
	cmd := laneCommand(root, bin, sc.Lane, "E2E_ARTIFACTS="+out.art, "E2E_SIM_FAULT="+fault)
	start := time.Now()
	log, err := cmd.CombinedOutput()
	out.wall = time.Since(start)
	v, verr := verdict.ReadVerdict(filepath.Join(out.art, "verdict.json"))
	if verr != nil {
		t.Fatalf("no verdict (%v): %v\n%s", err, verr, tail(string(log), 60))
	}
	out.result, out.failures = v.Result, len(v.Failures)
	if _, err := os.Stat(filepath.Join(out.art, "suites", sc.Suite, "failures.json")); err != nil {
		t.Errorf("suite %s wrote no failures.json: %v", sc.Suite, err)
	}
	switch {
	case sc.Green && v.Result != verdict.Pass:
		t.Errorf("%s green: result %s, want pass: %s", name, v.Result, v.Reason)
	case !sc.Green && v.Result != verdict.Fail:
		t.Errorf("%s under %s: result %s, want fail: %s", name, spec, v.Result, v.Reason)
	}
	var obs []simenv.Observation
	if !sc.Green {
		obs = observations(t, out.art)
	}
	want := map[string]suiteOutcome{}
	for _, e := range sc.Expect {
		want[e.Pool] = e
	}
	for _, x := range v.Failures {
		if _, ok := want[x.Pool]; !ok {
			t.Errorf("a failure no expectation names: %s", x.Line())
		}
	}
	checkPoolCases(t, filepath.Join(out.art, "suites", sc.Suite, "junit.xml"), l, want)
	for _, p := range l.Pools {
		e, ok := want[p.Name]
		if !ok {
			continue
		}
		var got *verdict.Failure
		for i := range v.Failures {
			if v.Failures[i].Pool == p.Name {
				got = &v.Failures[i]
				break
			}
		}
		if got == nil {
			t.Errorf("pool %s: no failure; want %s at %s (%s)", p.Name, e.Class, e.Stage, e.Fault)
			continue
		}
		if got.Class != e.Class || got.Stage != e.Stage {
			t.Errorf("pool %s: %s at %s, want %s at %s for %s (%s)", p.Name, got.Class, got.Stage, e.Class, e.Stage, e.Fault, got.Message)
		}
		if !strings.Contains(got.Spec, e.Spec) {
			t.Errorf("pool %s: the failure's spec %q does not name %q", p.Name, got.Spec, e.Spec)
		}
		if at, ok := firstObservation(obs, e.Fault, p.Name); !ok {
			t.Errorf("pool %s: the sim recorded no observation of %s", p.Name, e.Fault)
		} else {
			// A suite's spec looks in its own phase, after the pools joined: the bound counts from
			// the later of the fault becoming observable and the pools phase's end.
			if end, ok := poolsPhaseEnd(string(log), got.At); ok && end.After(at) {
				at = end
			}
			d := got.At.Sub(at)
			out.decided(fmt.Sprintf("%s@%s", e.Fault, p.Name), d)
			if d > maxTimeToVerdict {
				t.Errorf("pool %s: verdict %s after the fault became observable to its spec, more than %s", p.Name, d, maxTimeToVerdict)
			}
		}
		if e.Explains != "" {
			checkEvidence(t, judgedFault{e.Fault, expectation{class: e.Class, stage: join.Stage(e.Stage), terminal: true, explains: []string{e.Explains}}}, *got, out.art)
		}
		if e.Evidence != "" {
			found := false
			for _, ev := range got.Evidence {
				if filepath.Base(ev) == e.Evidence {
					_, err := os.Stat(filepath.Join(out.art, filepath.FromSlash(ev)))
					found = err == nil
				}
			}
			if !found {
				t.Errorf("pool %s: no %s among the failure's evidence: %v", p.Name, e.Evidence, got.Evidence)
			}
		}
	}
	if t.Failed() {
		t.Logf("run output:\n%s", tail(string(log), 80))
	}
	return out
}

// The suite scenarios name lanes that load, run the suite they name, and expect each fault they
// set on a pool of that lane.
func TestSuiteScenariosAreSound(t *testing.T) {
	root := projectRoot(t)
	all := suiteScenarios(t, root)
	if len(all) == 0 {
		t.Fatal("no examples/*/faults.yaml: the example suite's fault scenario is gone")
	}
	for _, s := range all {
		l, err := lane.Load(filepath.Join(root, filepath.FromSlash(s.Lane)))
		if err != nil {
			t.Fatal(err)
		}
		runs := false
		for _, x := range l.Suites {
			runs = runs || x.Name == s.Suite
		}
		if !runs {
			t.Errorf("%s: lane %s does not run suite %s", s.name(), s.Lane, s.Suite)
		}
		set, _ := faults.Parse(s.Faults)
		for _, e := range s.Expect {
			if !set.Selected(e.Fault) {
				t.Errorf("%s: expects %s, which it does not set", s.Faults, e.Fault)
			}
			found := false
			for _, p := range l.Pools {
				found = found || p.Name == e.Pool
			}
			if !found {
				t.Errorf("%s: pool %s is not a pool of %s", s.Faults, e.Pool, s.Lane)
			}
		}
	}
}

// checkPoolCases: the suite ran cases for every pool of l ("pool <name>" in their names); a
// pool in failing has a failed one, every other pool's cases passed.
func checkPoolCases(t *testing.T, path string, l *lane.Lane, failing map[string]suiteOutcome) {
	t.Helper()
	j, err := report.ReadJUnit(path)
	if err != nil {
		t.Errorf("the suite's junit.xml: %v", err)
		return
	}
	for _, p := range l.Pools {
		_, fails := failing[p.Name]
		n, failed := 0, 0
		for _, s := range j.Suites {
			for _, c := range s.Cases {
				if !strings.Contains(c.Name, " pool "+p.Name+" ") {
					continue
				}
				n++
				switch {
				case c.Failure != nil || c.Error != nil:
					failed++
					if !fails {
						t.Errorf("pool %s: no fault targets it, but its case %q failed", p.Name, c.Name)
					}
				case c.Skipped != nil || c.Status == "skipped":
					t.Errorf("pool %s: its case %q was skipped", p.Name, c.Name)
				}
			}
		}
		switch {
		case n == 0:
			t.Errorf("pool %s: the suite's junit.xml has no case of it (a case named \"pool %s ...\")", p.Name, p.Name)
		case fails && failed == 0:
			t.Errorf("pool %s: a fault targets it, but none of its %d cases failed", p.Name, n)
		}
	}
}

// poolsPhaseEnd is when the run's console said the pools phase ended ("15:04:05 phase pools
// ok ..."), on the day of ref, in ref's location.
func poolsPhaseEnd(log string, ref time.Time) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		clock, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(rest, "phase pools ok") {
			continue
		}
		c, err := time.ParseInLocation("15:04:05", clock, ref.Location())
		if err != nil {
			continue
		}
		y, m, d := ref.Date()
		return time.Date(y, m, d, c.Hour(), c.Minute(), c.Second(), 0, ref.Location()), true
	}
	return time.Time{}, false
}
