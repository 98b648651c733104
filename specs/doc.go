// Package specs holds the harness's specs as Ginkgo building blocks any suite can wire, in the
// style of Cluster API's test/e2e: each is XxxSpec(ctx, func() XxxSpecInput), registering its
// nodes inside the caller's container, taking everything it acts on from its input (the
// fixture's tenant and pools, the clock, where failures are noted), asserting with Gomega, and
// noting the typed error it fails on first, so its failure carries a class and a stage.
//
// The specs: PoolJoinSpec (a pool's workers joined, every per-worker assertion),
// MachineDeploymentVersionsSpec and RefusalsSpec (the platform's refusals of invalid pools).
package specs
