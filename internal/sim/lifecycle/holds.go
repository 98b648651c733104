package lifecycle

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// holds puts HeldFinalizer on what the scale-down-stuck and leak faults target, as soon as it
// exists (a finalizer cannot be added to an object being deleted), and records the moment the
// hold shows: the object is being deleted and the finalizer is the only one left, so every
// controller that had a say has released it.
type holds struct {
	c   client.Client
	env *simenv.Env

	mu       sync.Mutex
	pools    map[string]string // held VM (namespace/name) -> its pool
	observed map[string]bool
}

func setupHolds(mgr manager.Manager, env *simenv.Env) error {
	if !env.Faults.Selected(faults.ScaleDownStuck) && !env.Faults.Selected(faults.Leak) {
		return nil
	}
	h := &holds{c: mgr.GetClient(), env: env, pools: map[string]string{}, observed: map[string]bool{}}
	if env.Faults.Selected(faults.ScaleDownStuck) {
		if err := ctrl.NewControllerManagedBy(mgr).Named("sim-lifecycle-hold-vm").
			For(&kubevirtv1.VirtualMachine{}).
			Complete(reconcileFunc(h.vm)); err != nil {
			return err
		}
	}
	if env.Faults.Selected(faults.Leak) {
		return ctrl.NewControllerManagedBy(mgr).Named("sim-lifecycle-hold-pvc").
			For(&corev1.PersistentVolumeClaim{}).
			Complete(reconcileFunc(h.pvc))
	}
	return nil
}

type reconcileFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}

// vm holds every VirtualMachine of a pool scale-down-stuck targets.
func (h *holds) vm(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := h.c.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key := req.String()
	if vm.DeletionTimestamp != nil {
		h.mu.Lock()
		pool, held := h.pools[key]
		h.mu.Unlock()
		if held {
			h.observe(key, faults.ScaleDownStuck, pool, "VirtualMachine/"+key, vm.Finalizers,
				"the VirtualMachine is deleted and KubeVirt released it; "+HeldFinalizer+" holds it, and with it its DataVolume and PVC")
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.ContainsFinalizer(vm, HeldFinalizer) {
		return ctrl.Result{}, nil
	}
	pool, err := standin.PoolOf(ctx, h.c, vm.Namespace, vm.Name)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.Active(h.env, faults.ScaleDownStuck) {
		return ctrl.Result{}, nil
	}
	controllerutil.AddFinalizer(vm, HeldFinalizer)
	if err := h.c.Update(ctx, vm); err != nil {
		return requeueOnConflict(err)
	}
	h.mu.Lock()
	h.pools[key] = pool.Name
	h.mu.Unlock()
	return ctrl.Result{}, nil
}

// pvc holds every worker disk's PVC (owned by its DataVolume) while leak is selected.
func (h *holds) pvc(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &corev1.PersistentVolumeClaim{}
	if err := h.c.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	owned := false
	for _, o := range c.OwnerReferences {
		owned = owned || o.Kind == "DataVolume"
	}
	if !owned {
		return ctrl.Result{}, nil
	}
	if c.DeletionTimestamp != nil {
		if controllerutil.ContainsFinalizer(c, HeldFinalizer) {
			h.observe(req.String(), faults.Leak, "", "PersistentVolumeClaim/"+req.String(), c.Finalizers,
				"the PVC is deleted with its DataVolume and no pod uses it; "+HeldFinalizer+" holds it, and with it namespace "+c.Namespace)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(c, HeldFinalizer) {
		if err := h.c.Update(ctx, c); err != nil {
			return requeueOnConflict(err)
		}
	}
	return ctrl.Result{}, nil
}

// observe records, once per object, that only the held finalizer is left on it.
func (h *holds) observe(key string, f faults.Name, pool, object string, finalizers []string, detail string) {
	if len(finalizers) != 1 || finalizers[0] != HeldFinalizer {
		return
	}
	h.mu.Lock()
	seen := h.observed[key]
	h.observed[key] = true
	h.mu.Unlock()
	if seen {
		return
	}
	_ = h.env.Observe(simenv.Observation{Fault: f, Pool: pool, Object: object, Detail: detail + " (finalizers: " + strings.Join(finalizers, ", ") + ")"})
}

// requeueOnConflict ignores an object that is gone; a write that lost a race is an error, so
// the object is looked at again.
func requeueOnConflict(err error) (ctrl.Result, error) {
	return ctrl.Result{}, client.IgnoreNotFound(err)
}
