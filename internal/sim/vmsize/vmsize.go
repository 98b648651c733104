// Package vmsize plays the fault vmi-unschedulable: the pool's worker VMs ask for more memory
// than any management Node has, as if the platform had rendered the pool's machine template so.
// It sizes each KubevirtMachine of a targeted pool as Cluster API creates it, before CAPK makes
// its VirtualMachine (CAPK waits for the Machine's bootstrap data first: cluster-api-provider-
// kubevirt v0.1.10 controllers/kubevirtmachine_controller.go lines 191-199). The real
// virt-controller then sizes the launcher from the guest memory and KubeVirt's overhead, and the
// real scheduler leaves it Pending with "Insufficient memory", which virt-controller copies onto
// the VMI. The moment the launcher shows it is recorded by the virt-handler stand-in
// (internal/sim/kubevirt), which watches launchers.
package vmsize

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// SizedAnnotation marks a KubevirtMachine this package sized, so it is sized once.
const SizedAnnotation = "sim.cozy-e2e.io/vmi-unschedulable"

// Setup registers the sizing on mgr when vmi-unschedulable is selected.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	if !env.Faults.Selected(faults.VMIUnschedulable) {
		return nil
	}
	km := &unstructured.Unstructured{}
	km.SetGroupVersionKind(names.KubevirtMachineGVK)
	s := &sizer{c: mgr.GetClient(), env: env}
	return ctrl.NewControllerManagedBy(mgr).Named("sim-vmsize").For(km).Complete(s)
}

type sizer struct {
	c   client.Client
	env *simenv.Env
}

func (s *sizer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	km := &unstructured.Unstructured{}
	km.SetGroupVersionKind(names.KubevirtMachineGVK)
	if err := s.c.Get(ctx, req.NamespacedName, km); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if km.GetAnnotations()[SizedAnnotation] != "" || km.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	pool, err := standin.PoolOf(ctx, s.c, km.GetNamespace(), km.GetName())
	if err != nil {
		return ctrl.Result{}, standin.IgnoreNotFound(err)
	}
	if !pool.Active(s.env, faults.VMIUnschedulable) {
		return ctrl.Result{}, nil
	}
	mem, err := oversized(ctx, s.c)
	if err != nil {
		return ctrl.Result{}, err
	}
	domain := []string{"spec", "virtualMachineTemplate", "spec", "template", "spec", "domain"}
	if err := unstructured.SetNestedField(km.Object, mem.String(), append(domain, "memory", "guest")...); err != nil {
		return ctrl.Result{}, err
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(km.Object, append(domain, "resources", "requests", "memory")...); found {
		if err := unstructured.SetNestedField(km.Object, mem.String(), append(domain, "resources", "requests", "memory")...); err != nil {
			return ctrl.Result{}, err
		}
	}
	ann := km.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[SizedAnnotation] = mem.String()
	km.SetAnnotations(ann)
	return ctrl.Result{}, s.c.Update(ctx, km)
}

// oversized is twice the largest allocatable memory of the management Nodes.
func oversized(ctx context.Context, c client.Client) (resource.Quantity, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return resource.Quantity{}, err
	}
	largest := resource.MustParse("1Gi")
	for _, n := range nodes.Items {
		if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok && q.Cmp(largest) > 0 {
			largest = q.DeepCopy()
		}
	}
	return *resource.NewQuantity(2*largest.Value(), resource.BinarySI), nil
}
