package kubernetes

import (
	"context"
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/testbed"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
)

// describe wires the specs into the suite's container (suiterun.Run brings the tenant up before
// them and tears it down after): one join spec per pool (labelled with its class, OS and the
// lane), the API-version agreement spec, the refusal specs, and the pool lifecycle
// (remediation, scaling, rollout, then the deletion of the whole tenant), each on the pool the
// lane gives it.
//
// The specs run one after another, in the order registered here. On a lane whose budget gives
// clusters timelines of their own (lane.Phase.Cluster), the order follows the timelines: first
// the specs of a timeline without pools (the refusals, on the refusal cluster's), which wait on
// no join; then each timeline with pools, the longest first: its join specs, then the
// lifecycle specs on its pools, which start once its own pools joined while the other
// timelines' pools go on joining; then what is shared. On other lanes: the join specs, the
// refusals, the lifecycle.
func (r *refusals) describe(w *suiterun.World) {
	ctx := context.Background()
	sel, err := Select(w.Lane)
	if err != nil {
		// Phases parsed the same filter already: Setup refused the lane.
		panic(err)
	}
	r.sel, r.names = sel, w.Run.Cluster(lane.RefusalCluster)
	t := w.Tenant
	lifecycle := []struct {
		phase string
		on    bool
		pool  join.Pool
	}{
		{suiterun.PhaseRemediation, sel.Remediation, suiterun.PoolFor(t.Pools, suiterun.PhaseRemediation)},
		{suiterun.PhaseScaling, sel.Scaling, suiterun.PoolFor(t.Pools, suiterun.PhaseScaling)},
		{suiterun.PhaseRollout, sel.Rollout, suiterun.PoolFor(t.Pools, suiterun.PhaseRollout)},
	}
	refusalsOwn := w.Lane.OwnPhase(lane.RefusalCluster, suiterun.PhaseRefusals)
	if refusalsOwn {
		r.describeRefusals(ctx, w)
	}
	var done []string
	for _, tl := range timelines(w.Lane) {
		on := func(p join.Pool) bool { return w.Lane.TimelineOf(p.App.Role) == tl }
		w.JoinSpecsOf(ctx, on)
		for _, l := range lifecycle {
			if l.on && on(l.pool) && w.Lane.OwnPhase(l.pool.App.Role, l.phase) {
				describeLifecycle(ctx, w, l.phase, l.pool)
				done = append(done, l.phase)
			}
		}
	}
	w.JoinSpecsOf(ctx, func(p join.Pool) bool { return !w.Lane.OwnPhase(p.App.Role, testbed.PhasePools) })
	suiterun.MachineDeploymentVersionsSpec(ctx, func() suiterun.MachineDeploymentVersionsSpecInput {
		return suiterun.MachineDeploymentVersionsSpecInput{Management: w.Mgmt, Pool: t.Pools[0].Names, Before: w.EndPools}
	})
	if !refusalsOwn {
		r.describeRefusals(ctx, w)
	}
	for _, l := range lifecycle {
		if l.on && !slices.Contains(done, l.phase) {
			describeLifecycle(ctx, w, l.phase, l.pool)
		}
	}
	if sel.Deletion {
		Describe("lifecycle", Label(LabelLifecycle), func() {
			Describe("the tenant", Label(suiterun.PhaseDeletion), func() {
				suiterun.DeletionSpec(ctx, func() suiterun.DeletionSpecInput {
					return suiterun.DeletionSpecInput{Lifecycle: w.InPhase(), Keep: func() (bool, string) { return w.Keeps(false) },
						BeforeDelete: w.ClusterTrees}
				})
			})
		})
	}
}

// timelines are the clusters' own timelines that have a pools phase, the longest first (the
// specs run one after another: the longest starts first, the others' joins go on beside it).
func timelines(l *lane.Lane) []string {
	ts := slices.Clone(l.Budget.Layout().Timelines)
	slices.SortStableFunc(ts, func(a, b lane.Timeline) int { return int(b.Ceiling - a.Ceiling) })
	var out []string
	for _, t := range ts {
		if l.OwnPhase(t.Cluster, testbed.PhasePools) {
			out = append(out, t.Cluster)
		}
	}
	return out
}

// describeRefusals registers the refusal specs.
func (r *refusals) describeRefusals(ctx context.Context, w *suiterun.World) {
	Describe("refusals", Ordered, Label(LabelRefusals), func() {
		suiterun.RefusalsSpec(ctx, func() suiterun.RefusalsSpecInput {
			return suiterun.RefusalsSpecInput{Management: w.Mgmt, Platform: w.Tenant.Platform, Clock: w.Clock, Lane: w.Lane, Run: w.Run,
				Cluster: r.names, Created: r.created, Before: w.Before(suiterun.PhaseRefusals, lane.RefusalCluster), Failures: w.Failures}
		})
	})
}

// describeLifecycle registers the lifecycle spec of phase on pool p.
func describeLifecycle(ctx context.Context, w *suiterun.World, phase string, p join.Pool) {
	Describe("lifecycle", Label(LabelLifecycle), func() {
		Describe(fmt.Sprintf("pool %s", p.Name()), Label(phase), func() {
			switch phase {
			case suiterun.PhaseRemediation:
				suiterun.RemediationSpec(ctx, func() suiterun.RemediationSpecInput {
					return suiterun.RemediationSpecInput{Lifecycle: w.InPhaseOn(phase, p), Pool: p, MaxUnhealthy: "100%"}
				})
			case suiterun.PhaseScaling:
				suiterun.ScalingSpec(ctx, func() suiterun.ScalingSpecInput {
					return suiterun.ScalingSpecInput{Lifecycle: w.InPhaseOn(phase, p), Pool: p, To: suiterun.ScaleTo(p)}
				})
			case suiterun.PhaseRollout:
				suiterun.RolloutSpec(ctx, func() suiterun.RolloutSpecInput {
					return suiterun.RolloutSpecInput{Lifecycle: w.InPhaseOn(phase, p), Pool: p, Change: suiterun.CPUChange()}
				})
			}
		})
	})
}
