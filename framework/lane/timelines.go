package lane

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// A phase that names a cluster (budget.phases[].cluster) runs on that conformance cluster's
// own timeline, beside the other clusters' timelines: the phases naming one cluster run in
// their order, one after another, and each timeline starts once the shared phases before the
// timelines ended. The shared phases after them start once every timeline ended. A cluster
// entry expanded by its versions ("join" into join-v1-35 and join-v1-34) is one timeline, its
// clusters at once (the ceiling holds the slowest). The budget counts the timelines as
// parallel: the longest, not their sum.

// Layout is the budget's phases as they run, by index into Budget.Phases.
type Layout struct {
	// Before are the shared phases before the timelines (all of them when there are none).
	Before []int
	// Timelines are the clusters' own phases, side by side, in the order the lane names them.
	Timelines []Timeline
	// After are the shared phases once every timeline ended.
	After []int
}

// Timeline is one cluster's own phases.
type Timeline struct {
	Cluster string
	Phases  []int
	// Ceiling is the sum of its phases' ceilings.
	Ceiling time.Duration
}

// ClusterPhases are the phases every conformance cluster runs at the same time, each cluster
// on its own (the kubernetes suite's fixture: tenant brings every cluster's control plane up at
// once, pools joins every cluster's pools at once, each from its own control plane up): each
// ceiling holds the slowest cluster and is budgeted once, not once per cluster. A test of
// framework/testbed holds these names to its own.
var ClusterPhases = []string{"tenant", "pools"}

// Timed reports whether any phase runs on a cluster's own timeline.
func (b Budget) Timed() bool {
	return slices.ContainsFunc(b.Phases, func(p Phase) bool { return p.Cluster != "" })
}

// Layout places each phase: the shared phases up to the first that names a cluster, the
// timelines, then the shared phases after the last (a budget lanes-check passed has no shared
// phase between two that name a cluster; Layout counts one there as after).
func (b Budget) Layout() Layout {
	var l Layout
	first, last := -1, -1
	for i, p := range b.Phases {
		if p.Cluster != "" {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	for i, p := range b.Phases {
		switch {
		case first < 0 || i < first:
			l.Before = append(l.Before, i)
		case p.Cluster == "" || i > last:
			l.After = append(l.After, i)
		default:
			k := slices.IndexFunc(l.Timelines, func(t Timeline) bool { return t.Cluster == p.Cluster })
			if k < 0 {
				l.Timelines = append(l.Timelines, Timeline{Cluster: p.Cluster})
				k = len(l.Timelines) - 1
			}
			l.Timelines[k].Phases = append(l.Timelines[k].Phases, i)
			l.Timelines[k].Ceiling += p.Ceiling.D()
		}
	}
	return l
}

// Label names the phase for people: its name, and the cluster whose own phase it is.
func (p Phase) Label() string {
	if p.Cluster == "" {
		return p.Name
	}
	return p.Name + " (cluster " + p.Cluster + ")"
}

// Longest is the timeline with the largest ceiling sum (the first of equals); ok is false
// when there is none.
func (l Layout) Longest() (t Timeline, ok bool) {
	for _, c := range l.Timelines {
		if !ok || c.Ceiling > t.Ceiling {
			t, ok = c, true
		}
	}
	return t, ok
}

// Timeline is the timeline of phase i's cluster, or nil for a shared phase.
func (l Layout) Timeline(i int) *Timeline {
	for k := range l.Timelines {
		if slices.Contains(l.Timelines[k].Phases, i) {
			return &l.Timelines[k]
		}
	}
	return nil
}

// ReserveAfter is what phase i must leave for the phases after it on its way to the end (each
// at its ReserveOrCeiling): the rest of its own timeline and the shared phases after the
// timelines; for a shared phase before them, the later shared ones and the longest timeline.
func (b Budget) ReserveAfter(i int) time.Duration {
	l := b.Layout()
	var d time.Duration
	sum := func(idx []int, from int) {
		for _, j := range idx {
			if j > from {
				d += b.Phases[j].ReserveOrCeiling()
			}
		}
	}
	sum(l.After, i)
	if t := l.Timeline(i); t != nil {
		sum(t.Phases, i)
		return d
	}
	if slices.Contains(l.After, i) {
		return d
	}
	sum(l.Before, i)
	longest := time.Duration(0)
	for _, t := range l.Timelines {
		var s time.Duration
		for _, j := range t.Phases {
			s += b.Phases[j].ReserveOrCeiling()
		}
		longest = max(longest, s)
	}
	return d + longest
}

// PhaseOn is the index of phase name on cluster's timeline, else of the shared phase name;
// cluster "" (a caller that runs on no cluster's timeline) finds name wherever it is only
// once. It is -1 when there is none, or when cluster is "" and name is on several timelines.
func (b Budget) PhaseOn(cluster, name string) int {
	shared, anywhere, n := -1, -1, 0
	for i, p := range b.Phases {
		if p.Name != name {
			continue
		}
		switch {
		case cluster != "" && p.Cluster == cluster:
			return i
		case p.Cluster == "":
			shared = i
		}
		anywhere = i
		n++
	}
	if shared >= 0 || cluster != "" {
		return shared
	}
	if n == 1 {
		return anywhere
	}
	return -1
}

// TimelineOf is the timeline conformance cluster name runs its own phases on: the clusters
// entry it was expanded from, else its name. A cluster the budget gives no phase of its own
// runs on the shared phases (PhaseOn falls back to them).
func (l *Lane) TimelineOf(name string) string {
	for _, c := range l.ClusterSpecs {
		if c.Name == name && c.Expanded != "" {
			return c.Expanded
		}
	}
	return name
}

// OwnPhase reports whether the budget gives conformance cluster (or a clusters entry, or the
// refusal cluster) a phase name of its own, on its timeline, rather than the shared one.
func (l *Lane) OwnPhase(cluster, name string) bool {
	tl := l.TimelineOf(cluster)
	i := l.Budget.PhaseOn(tl, name)
	return i >= 0 && l.Budget.Phases[i].Cluster == tl
}

// validateTimelines holds the phases that name a cluster to the rules the clock runs them by:
// one block of timelines, each phase once per timeline, each timeline a cluster of the lane
// with a pools phase of its own when it has pools, and no shared pools phase beside them.
func (l *Lane) validateTimelines(v *validator) {
	b := l.Budget
	if !b.Timed() {
		return
	}
	lay := b.Layout()
	first, last := lay.Timelines[0].Phases[0], lastTimed(lay)
	for i := first; i <= last; i++ {
		if p := b.Phases[i]; p.Cluster == "" {
			v.fail(fmt.Sprintf("budget.phases[%d].cluster", i), "phase %s names no cluster but sits between phases that do: the clusters' own phases are one block, after the shared phases they wait for and before those that wait for every cluster", p.Name)
		}
	}
	for i, p := range b.Phases {
		if p.Cluster == "" && p.Name == "pools" {
			v.fail(fmt.Sprintf("budget.phases[%d].cluster", i), "a shared pools phase beside phases that name a cluster: give each cluster with pools a pools phase of its own (cluster: <name>)")
		}
	}
	if !slices.ContainsFunc(b.Phases[:first], func(q Phase) bool { return q.Name == "tenant" }) {
		v.fail(fmt.Sprintf("budget.phases[%d]", first), "the clusters' own phases must come after the shared tenant phase, which brings every cluster's control plane up")
	}
	withPools := map[string]bool{}
	for _, c := range l.Clusters() {
		withPools[l.TimelineOf(c)] = true
	}
	known := slices.Sorted(maps.Keys(withPools))
	for _, t := range lay.Timelines {
		if !withPools[t.Cluster] && t.Cluster != RefusalCluster {
			v.fail(fmt.Sprintf("budget.phases[%d].cluster", t.Phases[0]), "%q is not a conformance cluster of the lane (clusters: %s)", t.Cluster, strings.Join(known, ", "))
		}
	}
	for _, c := range known {
		if !l.OwnPhase(c, "pools") {
			v.fail("budget.phases", "cluster %s has pools but no pools phase of its own (a phase pools with cluster: %s): every cluster runs on its own timeline once one does", c, c)
		}
	}
}

// lastTimed is the index of the last phase that names a cluster.
func lastTimed(l Layout) int {
	last := -1
	for _, t := range l.Timelines {
		last = max(last, t.Phases[len(t.Phases)-1])
	}
	return last
}
