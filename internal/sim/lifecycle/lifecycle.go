// Package lifecycle stands in for what happens to workers after they joined, where the other
// stand-ins stop: a guest that powered off stops renewing its Node's Lease, so the tenant's
// node lifecycle controller marks the Node Ready=Unknown (kwok, which plays every tenant
// kubelet, would otherwise keep renewing it); and the faults of the lifecycle specs:
// mhc-blocked (a second worker's kubelet goes silent with the one that powered off, observed
// here), scale-down-stuck and leak (a finalizer no controller removes).
package lifecycle

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// HeldFinalizer is the finalizer of the scale-down-stuck and leak faults: no controller of the
// sim removes it.
const HeldFinalizer = "sim.cozy-e2e.io/held"

// Setup registers the kubelet, the holds and the MachineHealthCheck observer on mgr.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	tenants := &standin.Tenants{}
	lost := &lostWorkers{pools: map[string]bool{}}
	if err := setupKubelet(mgr, env, tenants, lost); err != nil {
		return err
	}
	if err := setupHolds(mgr, env); err != nil {
		return err
	}
	return setupMHC(mgr, env, lost)
}

// lostWorkers are the pools (namespace/cluster/pool) where mhc-blocked silenced a second
// worker: only from then on is a MachineHealthCheck that will not remediate the fault's doing
// (a pool still joining has no healthy Machine either).
type lostWorkers struct {
	mu    sync.Mutex
	pools map[string]bool
}

func (l *lostWorkers) add(pool string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pools[pool] = true
}

func (l *lostWorkers) has(pool string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pools[pool]
}
