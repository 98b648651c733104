package lane

import (
	"fmt"
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
}

// SuiteCatalog is what each suite needs of a lane, by suite name (suites/<name>).
type SuiteCatalog map[string][]PhaseNeed

// CheckSuites holds the lane's suites to the catalogue: every suite must be known, and every
// phase a suite runs in must be in the lane's budget with a ceiling at least its floor.
func (l *Lane) CheckSuites(cat SuiteCatalog) Errors {
	v := &validator{file: l.File, lines: l.lines}
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
			p, ok := l.Budget.Phase(n.Name)
			if !ok {
				v.fail("budget.phases", "has no phase %q, which suite %s runs in (add it with a ceiling%s)", n.Name, s.Name, floorHint(n))
				continue
			}
			if n.Min > 0 && p.Ceiling.D() < n.Min {
				v.fail(fmt.Sprintf("budget.phases[%d].ceiling", l.phaseIndex(n.Name)), "%s is shorter than %s, the least phase %s of suite %s can hold (%s)",
					p.Ceiling, n.Min, n.Name, s.Name, n.Why)
			}
		}
	}
	return v.errs
}

func floorHint(n PhaseNeed) string {
	if n.Min <= 0 {
		return ""
	}
	return fmt.Sprintf(" of at least %s: %s", n.Min, n.Why)
}

func (l *Lane) phaseIndex(name string) int {
	for i, p := range l.Budget.Phases {
		if p.Name == name {
			return i
		}
	}
	return -1
}
