package kubernetes

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/suites/internal/suite"
)

// describe builds the spec tree from the lane: one spec per pool (labelled with its class,
// OS and the lane), the API-version agreement spec, and the refusal specs; teardown runs
// after them whatever happened.
func describe(st *state) {
	s := st.s
	ReportAfterEach(func(r SpecReport) { s.Failures.Spec(r) })
	ReportAfterSuite("failures, timings and manifest", func(Report) {
		if err := s.Finish(); err != nil {
			fmt.Fprintf(s.Log, "kubernetes suite: writing its reports: %v\n", err)
		}
	})
	Describe("kubernetes", Ordered, ContinueOnFailure, Label("lane:"+s.Lane.Name), func() {
		BeforeAll(func(ctx SpecContext) {
			DeferCleanup(func(ctx SpecContext) { st.teardown(ctx) })
			st.bringUp(ctx)
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
				pools = append(pools, st.names.Pool(v.Pool))
			case v.Stage != "tenant" && v.Stage != "pools":
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
		for _, p := range st.pools {
			labels := Label("pool:"+p.spec.Name, "class:"+p.spec.Class, "os:"+p.os.Name)
			labels = append(labels, p.labels...)
			It(fmt.Sprintf("pool %s on class %s joins: every worker is a Ready Node named like its VMI, with its providerID, the Cluster API annotations and a pod running on it", p.spec.Name, p.spec.Class),
				labels, func(ctx SpecContext) {
					AddReportEntry(suite.PoolEntry, p.spec.Name)
					st.poolSpec(ctx, p)
				})
		}
		It("a MachineDeployment reads the same at v1beta1 and v1beta2", Label("api-versions"), func(ctx SpecContext) {
			st.endPools()
			st.versionsSpec(ctx)
		})
		Describe("refusals", Ordered, Label("refusals"), func() {
			st.describeRefusals()
		})
	})
}
