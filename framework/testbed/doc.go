// Package testbed is the tenant a spec runs on, and its life: framework/join follows its pools
// and suites/suiterun act on it (fixtures/, a different thing, is the YAML the sim installs).
//
// It is a library any Ginkgo suite (or plain Go test) can use: New makes a Tenant from the lane; Tenant.Up creates the run's Tenant
// app, the lane's classes and the tenant Kubernetes clusters with the lane's pools and waits for
// their control planes; as each is up, it starts following its pools' joins in the background
// (Pools), keeping each pool's record the moment it joined (Pools.Await); Tenant.Teardown
// deletes what was made and checks that no VM, VMI, DataVolume or PVC is left. Each runs inside
// its lane phase (tenant, pools, teardown) and returns typed errors (a *join.StageError, a
// *tenant.WaitError, a *DeadlineError, a *ConfigurationError, the budget's own): the framework
// decides nothing, the specs assert. suiterun.Run drives it for a suite.
//
// It also offers the pieces the lifecycle specs are made of: a spec's stages, recorded and
// reported as the join's (Stages), the product timeouts a lane declares for a phase
// (Timeouts), the objects a worker is made of (Worker) and whether what is left of it is gone
// or held by a finalizer no controller removes (Gone, Held, Leftovers), and the actions on a
// pool (StopWorker, ScaleMachineDeployment).
package testbed
