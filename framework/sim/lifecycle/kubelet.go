package lifecycle

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/standin"
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
// Node's Lease once more.
type kubelet struct {
	c       client.Client
	env     *simenv.Env
	tenants *standin.Tenants
}

func setupKubelet(mgr manager.Manager, env *simenv.Env, tenants *standin.Tenants) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-lifecycle-kubelet").
		For(&kubevirtv1.VirtualMachineInstance{}).
		Complete(&kubelet{c: mgr.GetClient(), env: env, tenants: tenants})
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
	node, err := nodeOf(ctx, wc, vmi.Name)
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
	case powerOff && !silenced:
		// The kubelet's last renewal stands (renewTime is left as it was); it is held in the
		// kubelet's own name (a kubelet's holderIdentity is its node name), so kwok leaves it.
		holder, dur := node, int32(silentLeaseSeconds)
		lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &holder, &dur
		return retry(wc.Update(ctx, lease))
	case !powerOff && silenced:
		// A guest of that name runs again: its kubelet renews the Lease (kwok creates it anew).
		return retry(wc.Delete(ctx, lease))
	}
	return ctrl.Result{}, nil
}

// retry asks for another look when the Lease changed under the write (kwok renewed it), and
// ignores a Lease that is gone.
func retry(err error) (ctrl.Result, error) {
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{Requeue: true}, nil
	case apierrors.IsNotFound(err):
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
