package kubernetes

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/specs"
)

// describe wires the specs into the suite's tree: one join spec per pool (labelled with its
// class, OS and the lane), the API-version agreement spec, the refusal specs, and the pool
// lifecycle (remediation, scaling, rollout, then the deletion of the whole tenant), each on
// the pool the lane gives it; the teardown runs after them whatever happened.
func describe(st *state, sel Selection) {
	s := st.s
	ctx := context.Background()
	ReportAfterEach(func(r SpecReport) { s.Failures.Spec(r) })
	ReportAfterSuite("failures, timings and manifest", func(Report) {
		if err := s.Finish(); err != nil {
			fmt.Fprintf(s.Log, "kubernetes suite: writing its reports: %v\n", err)
		}
	})
	t := st.tenant
	image := s.Lane.Workload.Ref()
	lifecycle := func() specs.Lifecycle {
		return specs.Lifecycle{Tenant: t, Pools: st.joins(), Clock: s.Clock, Failures: s.Failures,
			OnProgress: s.JoinProgress(replicas(s)), Log: s.Log, Before: st.endPools}
	}
	Describe(Name, Ordered, ContinueOnFailure, Label("lane:"+s.Lane.Name), func() {
		BeforeAll(func(ctx SpecContext) {
			DeferCleanup(func(ctx SpecContext) { st.teardown(ctx) })
			st.bringUp(ctx, sel.Refusals)
		})
		// The evidence of a failed spec is collected right after it, inside the diagnostics
		// reserve, and attached to its failure record.
		AfterEach(func(ctx SpecContext) {
			r := CurrentSpecReport()
			if !r.Failed() {
				return
			}
			v := s.Failures.Judge(r)
			var pools []tenant.PoolNames
			switch {
			case v.Pool != "":
				if p, ok := t.Pool(v.Pool); ok {
					pools = append(pools, p.Names)
				}
			case v.Stage != "tenant" && v.Stage != "pools" && v.Class != "leak":
				// A refusal or an API-version disagreement says all in its message; the
				// reserve is kept for the pools.
				return
			}
			evidence := s.Collect(ctx, pools, v.Class, v.Stage)
			if v.Pool != "" {
				evidence = append(evidence, st.poolTree(ctx, v.Pool)...)
			}
			s.Failures.AddEvidence(r.FullText(), evidence)
		})
		for _, p := range t.Pools {
			labels := Label("pool:"+p.Name(), "class:"+p.Spec.Class, "os:"+p.OS.Name, "cluster:"+p.App.Role, "kubernetes:"+p.App.Release.Version)
			labels = append(labels, p.Labels...)
			Describe(fmt.Sprintf("pool %s on class %s in %s", p.Name(), p.Spec.Class, p.Cluster()), labels, func() {
				specs.PoolJoinSpec(ctx, func() specs.PoolJoinSpecInput {
					return specs.PoolJoinSpecInput{Pools: st.joins(), Pool: p, WorkloadImage: image, Failures: s.Failures, Log: s.Log}
				})
			})
		}
		specs.MachineDeploymentVersionsSpec(ctx, func() specs.MachineDeploymentVersionsSpecInput {
			return specs.MachineDeploymentVersionsSpecInput{Management: s.Mgmt, Pool: t.Pools[0].Names, Before: st.endPools}
		})
		Describe("refusals", Ordered, Label(LabelRefusals), func() {
			specs.RefusalsSpec(ctx, func() specs.RefusalsSpecInput {
				return specs.RefusalsSpecInput{Management: s.Mgmt, Platform: t.Platform, Clock: s.Clock, Lane: s.Lane, Run: s.Run,
					Cluster: st.refusals, Created: st.refusalsCreated, Before: st.endPools, Failures: s.Failures}
			})
		})
		Describe("lifecycle", Label(LabelLifecycle), func() {
			remediation, scaling, rollout := specs.PoolFor(t.Pools, specs.PhaseRemediation), specs.PoolFor(t.Pools, specs.PhaseScaling),
				specs.PoolFor(t.Pools, specs.PhaseRollout)
			Describe(fmt.Sprintf("pool %s", remediation.Name()), Label(specs.PhaseRemediation), func() {
				specs.RemediationSpec(ctx, func() specs.RemediationSpecInput {
					return specs.RemediationSpecInput{Lifecycle: lifecycle(), Pool: remediation, MaxUnhealthy: "100%"}
				})
			})
			Describe(fmt.Sprintf("pool %s", scaling.Name()), Label(specs.PhaseScaling), func() {
				specs.ScalingSpec(ctx, func() specs.ScalingSpecInput {
					return specs.ScalingSpecInput{Lifecycle: lifecycle(), Pool: scaling, To: specs.ScaleTo(scaling)}
				})
			})
			Describe(fmt.Sprintf("pool %s", rollout.Name()), Label(specs.PhaseRollout), func() {
				specs.RolloutSpec(ctx, func() specs.RolloutSpecInput {
					return specs.RolloutSpecInput{Lifecycle: lifecycle(), Pool: rollout, Change: specs.CPUChange()}
				})
			})
			Describe("the tenant", Label(specs.PhaseDeletion), func() {
				specs.DeletionSpec(ctx, func() specs.DeletionSpecInput {
					return specs.DeletionSpecInput{Lifecycle: lifecycle(), Keep: func() (bool, string) { return s.Keeps(false) },
						BeforeDelete: st.clusterTree}
				})
			})
		})
	})
}
