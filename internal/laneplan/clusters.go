package laneplan

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/cozy-e2e/framework/lane"
)

// phaseGroup is the plan's heading for phase i of lane l: the install's phases once before the
// clusters, the clusters' phases at once, and what follows them.
func phaseGroup(l *lane.Lane, i int) string {
	first, last := -1, -1
	for j, p := range l.Budget.Phases {
		if slices.Contains(lane.ClusterPhases, p.Name) {
			if first < 0 {
				first = j
			}
			last = j
		}
	}
	n := len(l.Clusters())
	switch {
	case first < 0:
		return ""
	case i < first:
		return "once, before any conformance cluster (one management cluster and platform for all of them):"
	case i <= last:
		return fmt.Sprintf("the %d conformance cluster(s) at once, each on its own; a ceiling holds the slowest, budgeted once and not %d times:", n, n)
	}
	return "then:"
}

// writePhases prints the budget's phases as they run, each with its ceiling and latest end
// (offset from the job's start if every phase before it used its ceiling): the shared phases,
// then each cluster's own timeline from the same start, side by side, then the shared phases
// after the longest.
func writePhases(w io.Writer, l *lane.Lane) {
	fmt.Fprintln(w, "phases (offset from job start: latest end if every phase before used its ceiling)")
	b := l.Budget
	lay := b.Layout()
	var at time.Duration
	group := ""
	one := func(i int, at time.Duration, indent string) {
		p := b.Phases[i]
		fmt.Fprintf(w, "%s%d. %-12s ceiling %-7s by +%s\n", indent, i+1, p.Name, p.Ceiling, at)
		if p.Note != "" {
			fmt.Fprintf(w, "%s     %s\n", indent, p.Note)
		}
		for _, name := range slices.Sorted(maps.Keys(p.Timeouts)) {
			fmt.Fprintf(w, "%s     timeout %s %s\n", indent, name, p.Timeouts[name])
		}
	}
	for _, i := range lay.Before {
		if g := phaseGroup(l, i); g != group {
			group = g
			fmt.Fprintf(w, "  %s\n", g)
		}
		at += b.Phases[i].Ceiling.D()
		one(i, at, "  ")
	}
	if longest, ok := lay.Longest(); ok {
		fmt.Fprintf(w, "  then each cluster on a timeline of its own, side by side from +%s (the budget counts the longest, %s's %s):\n", at, longest.Cluster, longest.Ceiling)
		for _, t := range lay.Timelines {
			var names []string
			for _, c := range l.Clusters() {
				if l.TimelineOf(c) == t.Cluster {
					names = append(names, c)
				}
			}
			on := ""
			if len(names) > 1 {
				on = fmt.Sprintf(" (clusters %s at once; a ceiling holds the slowest)", strings.Join(names, ", "))
			}
			fmt.Fprintf(w, "    cluster %s, %s%s:\n", t.Cluster, t.Ceiling, on)
			tat := at
			for _, i := range t.Phases {
				tat += b.Phases[i].Ceiling.D()
				one(i, tat, "    ")
			}
		}
		at += longest.Ceiling
		fmt.Fprintln(w, "  then, once every timeline ended:")
	}
	for _, i := range lay.After {
		at += b.Phases[i].Ceiling.D()
		one(i, at, "  ")
	}
}

// writeClusters prints the conformance clusters: each with its release and pools, where its
// version comes from, and what the chart offers at the pinned revision.
func writeClusters(w io.Writer, l *lane.Lane) {
	cs := l.ConformanceClusters()
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "conformance clusters: %d in one tenant of one install, each a Kubernetes app at its own release\n", len(cs))
	for _, c := range cs {
		var pools []string
		workers := 0
		for _, p := range l.Pools {
			if p.ClusterName() == c.Name {
				pools = append(pools, fmt.Sprintf("%s %d", p.Name, p.Replicas))
				workers += p.Replicas
			}
		}
		from := "the lane's kubernetes"
		for _, d := range l.ClusterSpecs {
			if d.Name == c.Name && d.Kubernetes != nil {
				from = "its own kubernetes"
			}
		}
		if c.Expanded != "" {
			from = fmt.Sprintf("clusters entry %s, versions %s", c.Expanded, c.Selected)
		}
		fmt.Fprintf(w, "  %-14s Kubernetes %-6s (kubelet %s)  %d workers: %s  [%s]\n", c.Name, c.Kubernetes.Version, c.Kubernetes.Patch, workers, strings.Join(pools, ", "), from)
	}
	tv := l.TenantVersions()
	fmt.Fprintf(w, "  versions held to the platform's Kubernetes chart at the pinned revision: %s; releases from %s\n\n", tv, tv.Patches())
}
