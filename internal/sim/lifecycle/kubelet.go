package lifecycle

import (
	"context"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// silentLeaseSeconds is the duration written on the Lease of a Node whose guest powered off.
// A real kubelet that is gone renews nothing and nobody takes its Lease over; kwok does take
// over a Lease once it expired (sigs.k8s.io/kwok v0.8.0 pkg/kwok/controllers/
// node_lease_controller.go:305-318) and, holding it, plays the Node again. An hour keeps kwok
// away for any run; the node lifecycle controller reads only renewTime, never the duration
// (kubernetes v1.35.4 pkg/controller/nodelifecycle/node_lifecycle_controller.go:930-940).
const silentLeaseSeconds = 3600

const (
	nodeLeaseNamespace = "kube-node-lease"
	providerIDPrefix   = "kubevirt://"
)

// kubelet follows the VMIs: when a VMI is being deleted (its guest powers off), the kubelet of
// the Node it ran goes silent; when a VMI of that name runs again, its new kubelet renews the
// Node's Lease once more. Under mhc-blocked, a worker of a targeted pool that powers off takes
// the kubelet of a second running worker of the pool with it (lost): that one stays silent.
type kubelet struct {
	c       client.Client
	env     *simenv.Env
	tenants *standin.Tenants

	mu   sync.Mutex
	lost map[string]bool // VMIs (namespace/name) whose kubelet mhc-blocked silenced
	// lostPools hears the pools where it did.
	lostPools *lostWorkers
}

func setupKubelet(mgr manager.Manager, env *simenv.Env, tenants *standin.Tenants, lost *lostWorkers) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-lifecycle-kubelet").
		For(&kubevirtv1.VirtualMachineInstance{}).
		Complete(&kubelet{c: mgr.GetClient(), env: env, tenants: tenants, lost: map[string]bool{}, lostPools: lost})
}

func (k *kubelet) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := k.c.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	powerOff := vmi.DeletionTimestamp != nil
	if !powerOff && vmi.Status.Phase != kubevirtv1.Running {
		return ctrl.Result{}, nil
	}
	clusterName := vmi.Labels[clusterv1.ClusterNameLabel]
	if clusterName == "" {
		return ctrl.Result{}, nil
	}
	wc, err := k.tenants.Client(ctx, k.c, vmi.Namespace, clusterName)
	if err != nil {
		return ctrl.Result{}, nil // the tenant is gone or not up: no kubelet of it to follow
	}
	k.mu.Lock()
	lost := k.lost[req.String()]
	k.mu.Unlock()
	if powerOff {
		if err := k.loseAnother(ctx, wc, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}
	return silence(ctx, wc, vmi.Name, powerOff || lost)
}

// silence makes the kubelet of the Node VMI vmi runs as silent (on) or, when it was silenced
// and its guest runs again, renew once more (off).
func silence(ctx context.Context, wc client.Client, vmi string, on bool) (ctrl.Result, error) {
	node, err := nodeOf(ctx, wc, vmi)
	if err != nil || node == "" {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	lease := &coordinationv1.Lease{}
	if err := wc.Get(ctx, client.ObjectKey{Namespace: nodeLeaseNamespace, Name: node}, lease); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	silenced := lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == node &&
		lease.Spec.LeaseDurationSeconds != nil && *lease.Spec.LeaseDurationSeconds == silentLeaseSeconds
	switch {
	case on && !silenced:
		// The kubelet's last renewal stands (renewTime is left as it was); it is held in the
		// kubelet's own name (a kubelet's holderIdentity is its node name), so kwok leaves it.
		holder, dur := node, int32(silentLeaseSeconds)
		lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &holder, &dur
		return retry(wc.Update(ctx, lease))
	case !on && silenced:
		// A guest of that name runs again: its kubelet renews the Lease (kwok creates it anew).
		return retry(wc.Delete(ctx, lease))
	}
	return ctrl.Result{}, nil
}

// loseAnother is mhc-blocked: when off, a powering-off worker of a targeted pool, is the first
// of its pool to go, the kubelet of another running worker of the pool goes silent with it
// (its VM runs on), once.
func (k *kubelet) loseAnother(ctx context.Context, wc client.Client, off *kubevirtv1.VirtualMachineInstance) error {
	if !k.env.Faults.Selected(faults.MHCBlocked) {
		return nil
	}
	pool, err := standin.PoolOf(ctx, k.c, off.Namespace, off.Name)
	if err != nil || !pool.Active(k.env, faults.MHCBlocked) {
		return client.IgnoreNotFound(err)
	}
	var vmis kubevirtv1.VirtualMachineInstanceList
	if err := k.c.List(ctx, &vmis, client.InNamespace(off.Namespace)); err != nil {
		return err
	}
	var other string
	for _, v := range vmis.Items {
		if v.Name == off.Name || v.DeletionTimestamp != nil || v.Status.Phase != kubevirtv1.Running {
			continue
		}
		if p, err := standin.PoolOf(ctx, k.c, v.Namespace, v.Name); err != nil || p.Name != pool.Name || p.Cluster != pool.Cluster {
			continue
		}
		k.mu.Lock()
		already := k.lost[v.Namespace+"/"+v.Name]
		k.mu.Unlock()
		if already {
			other = v.Name // lost before: silence it again (the write may have lost a race)
			break
		}
		if other == "" || v.Name < other {
			other = v.Name
		}
	}
	if other == "" {
		return nil
	}
	k.mu.Lock()
	k.lost[off.Namespace+"/"+other] = true
	k.mu.Unlock()
	// kwok renews the Lease every few seconds: a write that lost the race is made again.
	for range 10 {
		_, err := silence(ctx, wc, other, true)
		if apierrors.IsConflict(err) {
			continue
		}
		if err == nil {
			k.lostPools.add(pool.Namespace + "/" + pool.Cluster + "/" + pool.Name)
		}
		return err
	}
	return fmt.Errorf("mhc-blocked: the Lease of VMI %s/%s kept changing under the write", off.Namespace, other)
}

// retry ignores a Lease that is gone; a write that lost a race with kwok's renewal is an
// error, so the VMI is looked at again.
func retry(err error) (ctrl.Result, error) {
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// nodeOf is the tenant Node VMI vmi runs as: the one of its name, else the one with its
// providerID; "" when there is none.
func nodeOf(ctx context.Context, wc client.Client, vmi string) (string, error) {
	n := &corev1.Node{}
	err := wc.Get(ctx, client.ObjectKey{Name: vmi}, n)
	if err == nil {
		return n.Name, nil
	}
	if !apierrors.IsNotFound(err) {
		return "", err
	}
	var nodes corev1.NodeList
	if err := wc.List(ctx, &nodes); err != nil {
		return "", err
	}
	for _, n := range nodes.Items {
		if n.Spec.ProviderID == providerIDPrefix+vmi {
			return n.Name, nil
		}
	}
	return "", nil
}
