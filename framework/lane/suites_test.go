package lane

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func lifecycleLane(t *testing.T, phases string) *Lane {
	t.Helper()
	data := strings.Replace(good, "    - {name: pools, ceiling: 2m, timeouts: {schedulable: 30s}}\n",
		"    - {name: pools, ceiling: 2m, timeouts: {schedulable: 30s}}\n"+phases, 1)
	data = strings.Replace(data, "jobCap: 10m", "jobCap: 30m", 1)
	l, err := Parse("lanes/x.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var remediation = PhaseNeed{Name: "remediation", Waits: []string{"grace", "unknown", "startup"}, Margin: time.Minute, Why: "a replacement must join"}

// A phase's floor is the sum of the product timeouts the suite waits on there, as the lane
// declares them, plus the suite's margin; a ceiling under it is refused with the arithmetic.
func TestACeilingShorterThanTheTimeoutsItWaitsOnIsRefused(t *testing.T) {
	l := lifecycleLane(t, "    - {name: remediation, ceiling: 2m, timeouts: {grace: 50s, unknown: 30s, startup: 30s}}\n")
	errs := l.CheckSuites(SuiteCatalog{"kubernetes": {remediation}})
	want := "lanes/x.yaml:16: budget.phases[2].ceiling: 2m0s is shorter than 2m50s, the least phase remediation of suite kubernetes can hold (grace 50s + unknown 30s + startup 30s + margin 1m0s: a replacement must join)"
	if len(errs) != 1 || errs.Error() != want {
		t.Fatalf("got %v\nwant %s", errs, want)
	}
	l = lifecycleLane(t, "    - {name: remediation, ceiling: 3m, timeouts: {grace: 50s, unknown: 30s, startup: 30s}}\n")
	if errs := l.CheckSuites(SuiteCatalog{"kubernetes": {remediation}}); len(errs) > 0 {
		t.Fatalf("a ceiling above the floor refused: %v", errs)
	}
}

// A timeout the suite waits on must be declared: a lane cannot be checked against a value it
// does not state.
func TestATimeoutASuiteWaitsOnMustBeDeclared(t *testing.T) {
	l := lifecycleLane(t, "    - {name: remediation, ceiling: 5m, timeouts: {grace: 50s}}\n")
	errs := l.CheckSuites(SuiteCatalog{"kubernetes": {remediation}})
	for _, w := range []string{`budget.phases[2].timeouts: has no "unknown"`, `has no "startup", a product timeout suite kubernetes waits on in phase remediation`} {
		if !strings.Contains(errs.Error(), w) {
			t.Errorf("%v: missing %q", errs, w)
		}
	}
	l = lifecycleLane(t, "")
	if errs := l.CheckSuites(SuiteCatalog{"kubernetes": {remediation}}); !strings.Contains(errs.Error(), `has no phase "remediation", which suite kubernetes runs in (add it with a ceiling and the timeouts grace, unknown, startup it waits on, the ceiling at least their sum plus 1m0s)`) {
		t.Errorf("missing phase: %v", errs)
	}
}

// A suite that cannot say what it needs (its label filter does not parse) is refused by name.
func TestANeedThatCannotBeToldIsRefused(t *testing.T) {
	l := lifecycleLane(t, "")
	errs := l.CheckSuites(SuiteCatalog{"kubernetes": {{Err: errors.New(`"&&" is not a label filter`)}}})
	if !strings.Contains(errs.Error(), `suites[0].labelFilter: "&&" is not a label filter`) {
		t.Fatalf("%v", errs)
	}
}

// A pool is given to a known lifecycle spec, and a spec to one pool.
func TestPoolsAreGivenToKnownLifecycleSpecsOnce(t *testing.T) {
	pools := "pools:\n  - {name: md0, class: talos, replicas: 2, lifecycle: rollout}\n  - {name: md1, class: talos, replicas: 1, lifecycle: rollout}\n  - {name: md2, class: talos, replicas: 1, lifecycle: chaos}\n"
	data := strings.Replace(good, "pools:\n  - {name: md0, class: talos, replicas: 2}\n", pools, 1)
	_, err := Parse("lanes/x.yaml", []byte(data))
	for _, w := range []string{`pools[1].lifecycle: "rollout" is given to pool md0 already`, `pools[2].lifecycle: "chaos" is not a lifecycle spec (remediation, scaling, rollout)`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%v: missing %q", err, w)
		}
	}
}

// A phase a suite enters once per pool counts its ceiling once per pool: a lane that fits its
// job cap when the phase counts once, and not when it counts three times, is refused.
func TestAPerPoolPhaseCountsOncePerPool(t *testing.T) {
	data := strings.Replace(good, "    - {name: pools, ceiling: 2m, timeouts: {schedulable: 30s}}\n",
		"    - {name: pools, ceiling: 2m, timeouts: {schedulable: 30s}}\n    - {name: labels, ceiling: 2m}\n", 1)
	data = strings.Replace(data, "  - {name: md0, class: talos, replicas: 2}\n",
		"  - {name: md0, class: talos, replicas: 2}\n  - {name: md1, class: talos, replicas: 1}\n  - {name: md2, class: talos, replicas: 1}\n", 1)
	l, err := Parse("lanes/x.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	// 7m30s counted once: under the 10m cap; with labels 3 times, 11m30s.
	if errs := l.CheckSuites(SuiteCatalog{"kubernetes": {{Name: "labels"}}}); len(errs) > 0 {
		t.Fatalf("a phase entered once refused: %v", errs)
	}
	errs := l.CheckSuites(SuiteCatalog{"kubernetes": {{Name: "labels", PerPool: true}}})
	want := "lanes/x.yaml:10: budget: does not fit the job cap once the per-pool phases count as often as they run: 7m30s + 4m0s (phase labels of suite kubernetes runs once per pool, 3 times, so 4m0s more) = 11m30s, which is 1m30s over jobCap 10m0s"
	if len(errs) != 1 || errs.Error() != want {
		t.Fatalf("got %v\nwant %s", errs, want)
	}
}
