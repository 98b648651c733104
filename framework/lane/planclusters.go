package lane

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// ClusterPhases are the phases every conformance cluster runs at the same time, each cluster
// on its own (the kubernetes suite's fixture: tenant brings every cluster's control plane up at
// once, pools joins every cluster's pools at once, each from its own control plane up): each
// ceiling holds the slowest cluster and is budgeted once, not once per cluster. A test of
// framework/fixture holds these names to its own.
var ClusterPhases = []string{"tenant", "pools"}

// phaseGroup is the plan's heading for phase i: the install's phases once before the
// clusters, the clusters' phases at once, and what follows them.
func (l *Lane) phaseGroup(i int) string {
	first, last := -1, -1
	for j, p := range l.Budget.Phases {
		if slices.Contains(ClusterPhases, p.Name) {
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

// writeClusters prints the conformance clusters: each with its release and pools, where its
// version comes from, and what the chart offers at the pinned revision.
func writeClusters(w io.Writer, l *Lane) {
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
	fmt.Fprintf(w, "  versions held to the platform's Kubernetes chart at the pinned revision: %s; releases from %s\n\n", tv, tv.Patches)
}
