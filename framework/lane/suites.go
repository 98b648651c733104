package lane

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// PhaseNeed is a lane phase a suite runs in, and the least ceiling it can run in: the longest
// timeout of the product it waits on there (a MachineHealthCheck's startup timeout, say), so a
// lane whose ceiling is shorter can only ever report a deadline.
type PhaseNeed struct {
	Name string
	// Min is the shortest ceiling that can hold the phase's waits; zero: no floor.
	Min time.Duration
	// Why says where Min comes from.
	Why string
	// Waits are the product timeouts the phase waits on one after another, each a named
	// timeout the lane must declare for the phase (budget.phases[].timeouts.<name>: the value
	// its platform runs with); the ceiling must hold their sum plus Margin.
	Waits []string
	// Margin is what the phase needs beyond its Waits (the harness's own steps, a worker's
	// boot after the last timeout); it counts only with Waits.
	Margin time.Duration
	// Fixed are Waits the platform runs at a value no spec sets: the lane may not declare less
	// (a ceiling counted from less would not hold the wait).
	Fixed map[string]FixedTimeout
	// PerPool says the suite enters the phase once per pool of the lane, each time with the
	// phase's full ceiling (suiterun.Lifecycle.OnPool in a loop over the pools): the budget
	// counts its ceiling as often.
	PerPool bool
	// Cluster is the conformance cluster the phase acts on (the cluster of the pool a
	// lifecycle spec is given): when the budget gives clusters timelines of their own, the
	// phase must be on that cluster's or shared; "": any.
	Cluster string
	// Shared says the phase acts on every cluster at once (the tenant's deletion): it must be
	// a shared phase.
	Shared bool
	// Err, set on a need of its own, says the suite cannot tell what it needs of the lane (its
	// label filter does not parse, its folder has no suite.yaml); CheckSuites names it, at
	// the field of the suite's entry Field says (path, labelFilter: the default).
	Err   error
	Field string
}

// FixedTimeout is a product timeout the platform runs at a value no spec can set.
type FixedTimeout struct {
	Value time.Duration
	// Why says where the value comes from.
	Why string
}

// Floor is the least ceiling phase p can hold for the need: Min, or the sum of its Waits as p
// declares them plus Margin when that is more, with the arithmetic in words. A Wait p does not
// declare counts nothing (CheckSuites names it).
func (n PhaseNeed) Floor(p Phase) (time.Duration, string) {
	floor, why := n.Min, n.Why
	if len(n.Waits) == 0 {
		return floor, why
	}
	sum := n.Margin
	var terms []string
	for _, w := range n.Waits {
		d := p.Timeouts[w].D()
		sum += d
		terms = append(terms, fmt.Sprintf("%s %s", w, d))
	}
	terms = append(terms, fmt.Sprintf("margin %s", n.Margin))
	if sum > floor {
		floor = sum
		why = strings.Join(terms, " + ")
		if n.Why != "" {
			why += ": " + n.Why
		}
	}
	return floor, why
}

// SuiteCatalog is what each suite needs of a lane, by suite name (suites/<name>).
type SuiteCatalog map[string][]PhaseNeed

// CheckSuites holds the lane's suites to the catalogue: every suite must be known, and every
// phase a suite runs in must be in the lane's budget, declare the timeouts the suite waits on
// there, and have a ceiling at least its floor.
func (l *Lane) CheckSuites(cat SuiteCatalog) Errors {
	v := l.validator()
	known := make([]string, 0, len(cat))
	for name := range cat {
		known = append(known, name)
	}
	sort.Strings(known)
	for i, s := range l.Suites {
		needs, ok := cat[s.Name]
		if !ok {
			v.fail(fmt.Sprintf("suites[%d].name", i), "%q is not a suite of this harness (suites: %s)", s.Name, strings.Join(known, ", "))
			continue
		}
		for _, n := range needs {
			if n.Err != nil {
				field := n.Field
				if field == "" {
					field = "labelFilter"
				}
				v.fail(fmt.Sprintf("suites[%d].%s", i, field), "%v", n.Err)
				continue
			}
			idx := l.needed(n)
			if len(idx) == 0 {
				on := ""
				if n.Cluster != "" && l.Budget.Timed() {
					on = fmt.Sprintf(" shared or on cluster %s's timeline (cluster: %s), the cluster it acts on", n.Cluster, l.TimelineOf(n.Cluster))
				}
				v.fail("budget.phases", "has no phase %q%s, which suite %s runs in (add it with a ceiling%s)", n.Name, on, s.Name, floorHint(n))
				continue
			}
			for _, i := range idx {
				if n.Shared && l.Budget.Phases[i].Cluster != "" {
					v.fail(fmt.Sprintf("budget.phases[%d].cluster", i), "phase %s of suite %s acts on every cluster at once: it is a shared phase, after every cluster's own", n.Name, s.Name)
				}
				l.checkNeed(v, s.Name, n, i)
			}
		}
	}
	l.checkPerPool(v, cat)
	return v.errs
}

// needed are the indices of the budget's phases that need n holds: the one on the timeline of
// the cluster it acts on, or shared; every phase of its name when it acts on none.
func (l *Lane) needed(n PhaseNeed) []int {
	if n.Cluster != "" {
		if i := l.Budget.PhaseOn(l.TimelineOf(n.Cluster), n.Name); i >= 0 {
			return []int{i}
		}
		return nil
	}
	var out []int
	for i, p := range l.Budget.Phases {
		if p.Name == n.Name {
			out = append(out, i)
		}
	}
	return out
}

// checkNeed holds phase idx to need n of suite: the timeouts it waits on declared, at least
// what the platform fixes, and a ceiling at least its floor.
func (l *Lane) checkNeed(v *validator, suite string, n PhaseNeed, idx int) {
	p := l.Budget.Phases[idx]
	missing := false
	for _, w := range n.Waits {
		if _, ok := p.Timeouts[w]; !ok {
			missing = true
			v.fail(fmt.Sprintf("budget.phases[%d].timeouts", idx), "has no %q, a product timeout suite %s waits on in phase %s (declare the value the lane's platform runs with)",
				w, suite, n.Name)
		}
	}
	if missing {
		return
	}
	for _, w := range slices.Sorted(maps.Keys(n.Fixed)) {
		f := n.Fixed[w]
		if d := p.Timeouts[w].D(); d < f.Value {
			v.fail(fmt.Sprintf("budget.phases[%d].timeouts.%s", idx, w), "%s is under %s, what the platform runs it at and no spec of suite %s can set (%s): a ceiling counted from it would not hold the wait",
				d, f.Value, suite, f.Why)
		}
	}
	if floor, why := n.Floor(p); floor > 0 && p.Ceiling.D() < floor {
		v.fail(fmt.Sprintf("budget.phases[%d].ceiling", idx), "%s is shorter than %s, the least phase %s of suite %s can hold (%s)",
			p.Ceiling, floor, n.Name, suite, why)
	}
}

// checkPerPool holds the budget to the phases a suite enters once per pool: each entry gets
// the phase's full ceiling, so the sum counts the ceiling once per pool (Arithmetic counts it
// once).
func (l *Lane) checkPerPool(v *validator, cat SuiteCatalog) {
	a := l.Budget.Arithmetic()
	if a.Cap <= 0 {
		return
	}
	more, terms := l.PerPool(cat)
	if more > 0 && a.Total+more > a.Cap {
		v.fail("budget", "does not fit the job cap once the per-pool phases count as often as they run: %s + %s (%s) = %s, which is %s over jobCap %s",
			a.Total, more, strings.Join(terms, "; "), a.Total+more, a.Total+more-a.Cap, a.Cap)
	}
}

// PerPool is what the budget holds beyond Arithmetic for the phases the lane's suites enter
// once per pool (each entry gets the phase's full ceiling, Arithmetic counts it once), and
// the arithmetic in words; zero for a lane of one pool.
func (l *Lane) PerPool(cat SuiteCatalog) (time.Duration, []string) {
	if len(l.Pools) < 2 {
		return 0, nil
	}
	var more time.Duration
	var terms []string
	counted := map[string]bool{}
	for _, s := range l.Suites {
		for _, n := range cat[s.Name] {
			p, ok := l.Budget.Phase(n.Name)
			if !ok || !n.PerPool || counted[n.Name] {
				continue
			}
			counted[n.Name] = true
			d := p.Ceiling.D() * time.Duration(len(l.Pools)-1)
			more += d
			terms = append(terms, fmt.Sprintf("phase %s of suite %s runs once per pool, %d times, so %s more", n.Name, s.Name, len(l.Pools), d))
		}
	}
	return more, terms
}

func floorHint(n PhaseNeed) string {
	switch {
	case len(n.Waits) > 0:
		return fmt.Sprintf(" and the timeouts %s it waits on, the ceiling at least their sum plus %s", strings.Join(n.Waits, ", "), n.Margin)
	case n.Min > 0:
		return fmt.Sprintf(" of at least %s: %s", n.Min, n.Why)
	}
	return ""
}
