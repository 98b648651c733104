package kubernetes

import (
	"fmt"
	"strings"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// Peak is the most worker VMs the suite runs at once on a lane, and when.
type Peak struct {
	Workers int
	// Why is the arithmetic in words.
	Why string
}

// PeakWorkers is the most worker VMs the suite runs at once on lane l: every pool's workers
// from the pools phase on, plus the most that one of the lifecycle phases the lane's label
// filter selects adds (they run one after another, each pool back at its size after its
// phase):
//   - remediation: one replacement, created while the broken Machine is still being deleted;
//   - scaling: the pool grown to suiterun.ScaleSize;
//   - rollout: the MachineDeployment's maxSurge, which the chart renders as the pool's
//     maxReplicas (cozystack v1.6.1 packages/apps/kubernetes/templates/cluster.yaml:777), and
//     the harness pins maxReplicas to the pool's replicas (tenant.NodeGroup).
func PeakWorkers(l *lane.Lane) (Peak, error) {
	sel, err := Select(l)
	if err != nil {
		return Peak{}, err
	}
	peak := PoolsAtOnce(l)
	if len(l.Pools) == 0 {
		return peak, nil
	}
	var extras []string
	most := 0
	add := func(on bool, spec string, extra func(p lane.Pool) (int, string)) {
		if !on {
			return
		}
		p := l.Pools[suiterun.LanePoolFor(l.Pools, spec)]
		n, what := extra(p)
		extras = append(extras, fmt.Sprintf("%s +%d (%s)", spec, n, what))
		most = max(most, n)
	}
	add(sel.Remediation, suiterun.PhaseRemediation, func(p lane.Pool) (int, string) {
		return 1, "a replacement in pool " + p.Name
	})
	add(sel.Scaling, suiterun.PhaseScaling, func(p lane.Pool) (int, string) {
		to := suiterun.ScaleSize(p.Replicas)
		return to - p.Replicas, fmt.Sprintf("pool %s from %d to %d", p.Name, p.Replicas, to)
	})
	add(sel.Rollout, suiterun.PhaseRollout, func(p lane.Pool) (int, string) {
		return p.Replicas, fmt.Sprintf("pool %s surges by maxSurge = maxReplicas = %d", p.Name, p.Replicas)
	})
	if len(extras) > 0 {
		peak.Workers += most
		peak.Why += fmt.Sprintf(", then at most +%d in one lifecycle phase: %s", most, strings.Join(extras, ", "))
	}
	return peak, nil
}

// PoolsAtOnce is the lane's pools, every pool's workers at once: what any suite that brings
// the tenant up runs from its pools phase on.
func PoolsAtOnce(l *lane.Lane) Peak {
	base := 0
	var each []string
	for _, c := range l.Clusters() {
		n := 0
		for _, p := range l.Pools {
			if p.ClusterName() == c {
				n += p.Replicas
			}
		}
		base += n
		each = append(each, fmt.Sprintf("%s %d", c, n))
	}
	// Every cluster's pools join at once: their workers add up.
	why := fmt.Sprintf("%d in the pools", base)
	if len(each) > 1 {
		why += " of " + strings.Join(each, " + ") + ", every cluster at once"
	}
	return Peak{Workers: base, Why: why}
}
