package capk

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/sim/names"
	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/standin"
)

func setupCluster(mgr manager.Manager, env *simenv.Env) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-capk-cluster").
		For(newObj(names.KubevirtClusterGVK.Kind)).
		Complete(&clusterReconciler{c: mgr.GetClient(), env: env})
}

type clusterReconciler struct {
	c   client.Client
	env *simenv.Env
}

// Reconcile marks a KubevirtCluster ready. The sim runs no control-plane load balancer: the
// endpoint is the one in spec.controlPlaneEndpoint.
func (r *clusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kc := newObj(names.KubevirtClusterGVK.Kind)
	if err := r.c.Get(ctx, req.NamespacedName, kc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, managed := kc.GetAnnotations()[AnnotationManagedBy]; managed {
		return ctrl.Result{}, nil // externally managed: CAPK leaves it alone
	}
	if kc.GetDeletionTimestamp() != nil {
		if controllerutil.RemoveFinalizer(kc, ClusterFinalizer) {
			return ctrl.Result{}, client.IgnoreNotFound(r.c.Update(ctx, kc))
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(kc, ClusterFinalizer) {
		return ctrl.Result{}, r.c.Update(ctx, kc)
	}
	if ready, _, _ := unstructured.NestedBool(kc.Object, "status", "ready"); ready {
		return ctrl.Result{}, nil
	}
	_ = unstructured.SetNestedField(kc.Object, true, "status", "ready")
	standin.SetConditions(kc, r.env.Now(), standin.True("Ready"), standin.True("LoadBalancerAvailable"))
	return ctrl.Result{}, r.c.Status().Update(ctx, kc)
}
