package lifecycle

import (
	"context"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// mhcObserver records when a MachineHealthCheck of a pool mhc-blocked targets says it will not
// remediate an unhealthy Machine: the moment the fault shows through the API. The kubelet
// stand-in brings it about (a second worker of the pool goes silent with the broken one).
type mhcObserver struct {
	c   client.Client
	env *simenv.Env

	lost *lostWorkers

	mu   sync.Mutex
	seen map[string]bool
}

func setupMHC(mgr manager.Manager, env *simenv.Env, lost *lostWorkers) error {
	if !env.Faults.Selected(faults.MHCBlocked) {
		return nil
	}
	o := &mhcObserver{c: mgr.GetClient(), env: env, lost: lost, seen: map[string]bool{}}
	return ctrl.NewControllerManagedBy(mgr).Named("sim-lifecycle-mhc").
		For(&clusterv1.MachineHealthCheck{}).
		Complete(reconcileFunc(o.reconcile))
}

func (o *mhcObserver) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mhc := &clusterv1.MachineHealthCheck{}
	if err := o.c.Get(ctx, req.NamespacedName, mhc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The platform names a pool's MachineHealthCheck <cluster>-<pool>.
	pool := strings.TrimPrefix(mhc.Name, mhc.Spec.ClusterName+"-")
	if !o.lost.has(mhc.Namespace + "/" + mhc.Spec.ClusterName + "/" + pool) {
		return ctrl.Result{}, nil
	}
	c := meta.FindStatusCondition(mhc.Status.Conditions, clusterv1.MachineHealthCheckRemediationAllowedCondition)
	unhealthy := ptr.Deref(mhc.Status.ExpectedMachines, 0) - ptr.Deref(mhc.Status.CurrentHealthy, 0)
	if c == nil || c.Status != metav1.ConditionFalse || unhealthy <= 0 {
		return ctrl.Result{}, nil
	}
	o.mu.Lock()
	seen := o.seen[req.String()]
	o.seen[req.String()] = true
	o.mu.Unlock()
	if !seen {
		_ = o.env.Observe(simenv.Observation{Fault: faults.MHCBlocked, Pool: pool, Object: "MachineHealthCheck/" + req.String(),
			Detail: c.Reason + ": " + c.Message})
	}
	return ctrl.Result{}, nil
}
