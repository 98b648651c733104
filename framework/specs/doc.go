// Package specs holds the harness's specs as Ginkgo building blocks any suite can wire, in the
// style of Cluster API's test/e2e: each is XxxSpec(ctx, func() XxxSpecInput), registering its
// nodes inside the caller's container, taking everything it acts on from its input (the
// fixture's tenant and pools, the clock, where failures are noted), asserting with Gomega, and
// noting the typed error it fails on first, so its failure carries a class and a stage.
//
// The specs: PoolJoinSpec (a pool's workers joined, every per-worker assertion),
// MachineDeploymentVersionsSpec, RefusalsSpec (the platform's refusals of invalid pools), and
// the pool lifecycle: RemediationSpec, ScalingSpec, RolloutSpec and DeletionSpec. Each
// lifecycle spec runs in a lane phase of its own with a floor derived from the product
// timeouts it waits on (RemediationPhase and the others), and reports its stages as the join
// does.
//
// The spec kit, for a spec written anywhere (examples/nodelabels is one in a module of its
// own): Lifecycle.OnPool enters a spec's phase for one pool and gives its join record and a
// Step (the phase's context, the spec's Stages, Step.Must); Lifecycle.Start does so for a spec
// of the whole tenant; Must, MustIn and Within note a typed error or bound a spec's assertions
// outside a Step; Failures is where they are noted (suiterun.Failures).
package specs
