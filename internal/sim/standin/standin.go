// Package standin is what the sim's stand-in controllers share: which pool an object belongs to
// (for the fault catalogue), clients for tenant clusters from the kubeconfig Secret the platform
// writes, and Cluster API v1beta1-style conditions on unstructured provider objects.
package standin

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// Pool is the worker pool an object of a Machine belongs to.
type Pool struct {
	// Namespace and Cluster name the Cluster API Cluster (R = kubernetes-<name>).
	Namespace, Cluster string
	// Name is the pool (nodeGroups.<name>), from the MachineDeployment name R-<pool>.
	Name string
	// Machine is the Machine's name (and its KubevirtMachine's, VM's and VMI's), MachineUID
	// its UID (a replacement Machine is another UID, whatever its name).
	Machine    string
	MachineUID string
	// Kairos is true when the Machine bootstraps with a KairosConfig.
	Kairos bool
}

// PoolOf reads Machine namespace/machine and says which pool it belongs to. A Machine that is
// gone gives an error that apierrors.IsNotFound recognises.
func PoolOf(ctx context.Context, c client.Reader, namespace, machine string) (Pool, error) {
	var m clusterv1.Machine
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: machine}, &m); err != nil {
		return Pool{}, err
	}
	return PoolOfMachine(&m), nil
}

// PoolOfMachine says which pool m belongs to.
func PoolOfMachine(m *clusterv1.Machine) Pool {
	p := Pool{Namespace: m.Namespace, Cluster: m.Spec.ClusterName, Machine: m.Name, MachineUID: string(m.UID), Name: m.Name,
		Kairos: m.Spec.Bootstrap.ConfigRef.Kind == names.KairosConfigGVK.Kind}
	if md := m.Labels[clusterv1.MachineDeploymentNameLabel]; md != "" {
		p.Name = strings.TrimPrefix(md, p.Cluster+"-")
	}
	return p
}

// Active reports whether fault n applies to p under env.
func (p Pool) Active(env *simenv.Env, n faults.Name) bool {
	return env.Faults.Active(n, p.Name, p.Kairos)
}

func (p Pool) String() string { return fmt.Sprintf("%s/%s pool %s", p.Namespace, p.Cluster, p.Name) }

// IgnoreNotFound is apierrors' NotFound filter, for reconcilers of objects that went away.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
