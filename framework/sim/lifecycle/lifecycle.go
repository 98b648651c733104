// Package lifecycle stands in for what happens to workers after they joined, where the other
// stand-ins stop: a guest that powered off stops renewing its Node's Lease, so the tenant's
// node lifecycle controller marks the Node Ready=Unknown (kwok, which plays every tenant
// kubelet, would otherwise keep renewing it); and the faults of the lifecycle specs:
// mhc-blocked (observed here, rendered by the platform stand-in), scale-down-stuck and leak (a
// finalizer no controller removes).
package lifecycle

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/standin"
)

// HeldFinalizer is the finalizer of the scale-down-stuck and leak faults: no controller of the
// sim removes it.
const HeldFinalizer = "sim.cozy-e2e.io/held"

// Setup registers the kubelet, the holds and the MachineHealthCheck observer on mgr.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	tenants := &standin.Tenants{}
	if err := setupKubelet(mgr, env, tenants); err != nil {
		return err
	}
	if err := setupHolds(mgr, env); err != nil {
		return err
	}
	return setupMHC(mgr, env)
}
