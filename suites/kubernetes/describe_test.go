package kubernetes

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/specs"
	"github.com/cozystack/cozy-e2e/suite"
)

// describe wires the specs into the suite's container (suite.Run brings the tenant up before
// them and tears it down after): one join spec per pool (labelled with its class, OS and the
// lane), the API-version agreement spec, the refusal specs, and the pool lifecycle
// (remediation, scaling, rollout, then the deletion of the whole tenant), each on the pool the
// lane gives it.
func (r *refusals) describe(w *suite.World) {
	ctx := context.Background()
	sel, err := Select(w.Lane)
	if err != nil {
		// Phases parsed the same filter already: Setup refused the lane.
		panic(err)
	}
	r.sel, r.names = sel, w.Run.Cluster(lane.RefusalCluster)
	t := w.Tenant
	w.JoinSpecs(ctx)
	specs.MachineDeploymentVersionsSpec(ctx, func() specs.MachineDeploymentVersionsSpecInput {
		return specs.MachineDeploymentVersionsSpecInput{Management: w.Mgmt, Pool: t.Pools[0].Names, Before: w.EndPools}
	})
	Describe("refusals", Ordered, Label(LabelRefusals), func() {
		specs.RefusalsSpec(ctx, func() specs.RefusalsSpecInput {
			return specs.RefusalsSpecInput{Management: w.Mgmt, Platform: t.Platform, Clock: w.Clock, Lane: w.Lane, Run: w.Run,
				Cluster: r.names, Created: r.created, Before: w.EndPools, Failures: w.Failures}
		})
	})
	Describe("lifecycle", Label(LabelLifecycle), func() {
		remediation, scaling, rollout := specs.PoolFor(t.Pools, specs.PhaseRemediation), specs.PoolFor(t.Pools, specs.PhaseScaling),
			specs.PoolFor(t.Pools, specs.PhaseRollout)
		Describe(fmt.Sprintf("pool %s", remediation.Name()), Label(specs.PhaseRemediation), func() {
			specs.RemediationSpec(ctx, func() specs.RemediationSpecInput {
				return specs.RemediationSpecInput{Lifecycle: w.Lifecycle(), Pool: remediation, MaxUnhealthy: "100%"}
			})
		})
		Describe(fmt.Sprintf("pool %s", scaling.Name()), Label(specs.PhaseScaling), func() {
			specs.ScalingSpec(ctx, func() specs.ScalingSpecInput {
				return specs.ScalingSpecInput{Lifecycle: w.Lifecycle(), Pool: scaling, To: specs.ScaleTo(scaling)}
			})
		})
		Describe(fmt.Sprintf("pool %s", rollout.Name()), Label(specs.PhaseRollout), func() {
			specs.RolloutSpec(ctx, func() specs.RolloutSpecInput {
				return specs.RolloutSpecInput{Lifecycle: w.Lifecycle(), Pool: rollout, Change: specs.CPUChange()}
			})
		})
		Describe("the tenant", Label(specs.PhaseDeletion), func() {
			specs.DeletionSpec(ctx, func() specs.DeletionSpecInput {
				return specs.DeletionSpecInput{Lifecycle: w.Lifecycle(), Keep: func() (bool, string) { return w.Keeps(false) },
					BeforeDelete: w.ClusterTrees}
			})
		})
	})
}
