// Package suiterun is what every suite runs on, and the specs it wires: not a suite itself (a
// lane names its suites, each a folder beside this one, as suites/kubernetes). It holds the two
// halves of a suite process, as Cluster API's test/e2e holds its suite and its specs together.
//
// The run: the environment the orchestrator gives a suite (Env), the lane, the budget clock and
// the management cluster built from them (Setup), the world a suite's specs act on (World: the
// testbed's tenant with the lane's pools, framework/testbed, followed by framework/join), the
// turning of failed specs into verdict.Failure records (Failures, failures.json, judged by
// verdict.Judge) and of the clock into timings.json.
//
// The specs, as Ginkgo building blocks any suite can wire, in the style of Cluster API's
// test/e2e: each is XxxSpec(ctx, func() XxxSpecInput), registering its nodes inside the
// caller's container, taking everything it acts on from its input (the testbed's tenant and
// pools, the clock, the Failures it notes to), asserting with Gomega, and noting the typed
// error it fails on first, so its failure carries a class and a stage. They are PoolJoinSpec (a
// pool's workers joined, every per-worker assertion), MachineDeploymentVersionsSpec,
// RefusalsSpec (the platform's refusals of invalid pools), and the pool lifecycle:
// RemediationSpec, ScalingSpec, RolloutSpec and DeletionSpec. Each lifecycle spec runs in a lane
// phase of its own with a floor derived from the product timeouts it waits on
// (RemediationPhase and the others), and reports its stages as the join does.
//
// The spec kit, for a spec written anywhere (examples/nodelabels is one in a module of its
// own): Lifecycle.OnPool enters a spec's phase for one pool and gives its join record and a
// Step (the phase's context, the spec's Stages, Step.Must); Lifecycle.Start does so for a spec
// of the whole tenant; Must, MustIn and Within note a typed error to a Failures or bound a
// spec's assertions outside a Step.
//
// Ginkgo and Gomega stay here and in the suites: framework/ returns errors.
package suiterun
