package registry

import (
	"fmt"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/laneplan"
	"github.com/cozystack/cozy-e2e/suites/kubernetes"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// LifecycleTimeoutLines say, for each lifecycle phase the lane's suites run, the ceiling
// against the product timeouts its spec waits on, and how each timeout comes to be what the lane
// declares on the installed platform (the spec sets it where the chart reads one, or the
// platform runs it fixed), with the chart revisions' own defaults; none for a lane that runs no
// lifecycle spec.
func LifecycleTimeoutLines(l *lane.Lane) []string {
	needs, err := kubernetes.Phases(l)
	if err != nil {
		return []string{"lifecycle timeouts not planned: " + err.Error()}
	}
	var out []string
	for _, n := range needs {
		if len(n.Waits) == 0 || n.Name == suiterun.PhaseDeletion {
			continue
		}
		p, ok := l.Budget.Phase(n.Name)
		if !ok {
			continue
		}
		floor, why := n.Floor(p)
		out = append(out, fmt.Sprintf("%s: ceiling %s, at least %s = %s", n.Name, p.Ceiling, floor, why))
		seen := map[string]bool{}
		for _, w := range n.Waits {
			if seen[w] {
				continue
			}
			seen[w] = true
			out = append(out, fmt.Sprintf("  %s %s: %s", w, p.Timeouts[w], suiterun.TimeoutHolder(w)))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return append(out,
		"each spec reads its pool's MachineHealthCheck as the installed platform renders it (reported as \"installed MachineHealthCheck\"), sets what differs and fails as configuration when the platform does not take it",
		suiterun.ReadyFalseNote())
}

// lifecycleSection is the plan's section of lifecycle timeouts, nil when there are none.
func lifecycleSection(l *lane.Lane) []laneplan.Section {
	lines := LifecycleTimeoutLines(l)
	if len(lines) == 0 {
		return nil
	}
	return []laneplan.Section{{Title: "lifecycle timeouts (the installed platform's MachineHealthCheck, held to the lane's)", Lines: lines}}
}
