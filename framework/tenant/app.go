package tenant

import (
	"fmt"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
)

// App is one conformance cluster: a Kubernetes app of the tenant whose node groups are the
// lane's pools that name it (pools[].cluster).
type App struct {
	// Role is the lane's name for it (lane.DefaultCluster unless the pools name another).
	Role  string
	Names Names
	// Release is the tenant Kubernetes release it is created at (spec.version) and that its
	// Talos workers' kubelet reports.
	Release lane.Release
	// Pools are its pools' names, in the lane's order.
	Pools []string
	// Cluster is its tenant cluster, once its control plane answered.
	Cluster *cluster.Cluster
}

// String names the conformance cluster and its release: "cluster pools at Kubernetes v1.34.9".
func (a *App) String() string {
	return fmt.Sprintf("cluster %s at Kubernetes %s", a.Role, a.Release.Patch)
}
