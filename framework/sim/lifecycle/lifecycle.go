// Package lifecycle stands in for what happens to workers after they joined, where the other
// stand-ins stop: a guest that powered off stops renewing its Node's Lease, so the tenant's
// node lifecycle controller marks the Node Ready=Unknown (kwok, which plays every tenant
// kubelet, would otherwise keep renewing it).
package lifecycle

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/standin"
)

// Setup registers the kubelet on mgr.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	return setupKubelet(mgr, env, &standin.Tenants{})
}
