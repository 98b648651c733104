package kubevirt

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
)

func setupVM(mgr manager.Manager, env *simenv.Env) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-kubevirt-vm").
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Owns(&cdiv1.DataVolume{}).
		Complete(&vmReconciler{c: mgr.GetClient(), env: env})
}

type vmReconciler struct {
	c   client.Client
	env *simenv.Env
}

func (r *vmReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := r.c.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.c.Get(ctx, req.NamespacedName, vmi); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		vmi = nil
	}
	if vm.DeletionTimestamp != nil {
		if vmi != nil {
			if vmi.DeletionTimestamp == nil {
				return ctrl.Result{}, client.IgnoreNotFound(r.c.Delete(ctx, vmi))
			}
			return ctrl.Result{}, nil // the VMI's deletion brings us back
		}
		if controllerutil.RemoveFinalizer(vm, VMFinalizer) {
			return ctrl.Result{}, client.IgnoreNotFound(r.c.Update(ctx, vm))
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(vm, VMFinalizer) {
		return ctrl.Result{}, r.c.Update(ctx, vm)
	}
	running := true
	if rs := vm.Spec.RunStrategy; rs != nil && *rs == kubevirtv1.RunStrategyHalted {
		running = false
	} else if vm.Spec.Running != nil {
		running = *vm.Spec.Running
	}

	dvsReady, dvError := true, false
	for _, t := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{}
		err := r.c.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: t.Name}, dv)
		if apierrors.IsNotFound(err) {
			dv = &cdiv1.DataVolume{
				ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: t.Name, Labels: t.Labels, Annotations: t.Annotations},
				Spec:       *t.Spec.DeepCopy(),
			}
			if err := controllerutil.SetControllerReference(vm, dv, r.c.Scheme()); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.c.Create(ctx, dv); err != nil && !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, err
			}
			dvsReady = false
			continue
		} else if err != nil {
			return ctrl.Result{}, err
		}
		switch dv.Status.Phase {
		case cdiv1.Succeeded, cdiv1.WaitForFirstConsumer, cdiv1.PendingPopulation:
			// The VMI is created for these: a volume waiting for its first consumer is the VMI's
			// to bind (kubevirt/kubevirt v1.8.4 pkg/virt-controller/watch/vm/vm.go:557).
		default:
			dvsReady = false
		}
		if dv.Status.Phase == cdiv1.Failed || dv.Status.RestartCount > 0 {
			dvError = true
		}
	}

	if running && vmi == nil && dvsReady && vm.Spec.Template != nil {
		vmi = &kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: vm.Namespace, Name: vm.Name,
				Labels: copyMap(vm.Spec.Template.ObjectMeta.Labels), Annotations: copyMap(vm.Spec.Template.ObjectMeta.Annotations),
			},
			Spec: *vm.Spec.Template.Spec.DeepCopy(),
		}
		if err := controllerutil.SetControllerReference(vm, vmi, r.c.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.c.Create(ctx, vmi); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, err
		}
	} else if !running && vmi != nil && vmi.DeletionTimestamp == nil {
		if err := r.c.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
	}

	st := vm.Status.DeepCopy()
	st.Created = vmi != nil && vmi.Status.Phase != ""
	st.Ready = vmi != nil && condition(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceReady) == corev1.ConditionTrue
	ready := kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse, Reason: "VMINotExists", Message: "VMI does not exist"}
	var scheduled *kubevirtv1.VirtualMachineCondition
	switch {
	case !running:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
	case vmi == nil && dvError:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusDataVolumeError
	case vmi == nil:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusProvisioning
	case vmi.DeletionTimestamp != nil:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusTerminating
	default:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
		for _, c := range vmi.Status.Conditions {
			switch c.Type {
			case kubevirtv1.VirtualMachineInstanceReady:
				ready = kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: c.Status, Reason: c.Reason, Message: c.Message}
			case kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled):
				if c.Status == corev1.ConditionFalse {
					scheduled = &kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineConditionType(corev1.PodScheduled), Status: c.Status, Reason: c.Reason, Message: c.Message}
					if c.Reason == corev1.PodReasonUnschedulable {
						st.PrintableStatus = kubevirtv1.VirtualMachineStatusUnschedulable
					}
				}
			}
		}
		if vmi.Status.Phase == kubevirtv1.Running {
			st.PrintableStatus = kubevirtv1.VirtualMachineStatusRunning
		}
	}
	conds := []kubevirtv1.VirtualMachineCondition{ready}
	if scheduled != nil {
		conds = append(conds, *scheduled)
	}
	dvc := kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineConditionType("DataVolumesReady"), Status: corev1.ConditionTrue, Reason: "AllDVsReady", Message: "All of the VMI's DVs are bound and ready"}
	if !dvsReady {
		dvc.Status, dvc.Reason, dvc.Message = corev1.ConditionFalse, "NotAllDVsReady", "Not all of the VMI's DVs are ready"
	}
	conds = append(conds, dvc)
	st.Conditions = mergeVMConditions(vm.Status.Conditions, conds, metav1.NewTime(r.env.Now()))
	if equality.Semantic.DeepEqual(st, &vm.Status) {
		return ctrl.Result{}, nil
	}
	vm.Status = *st
	return ctrl.Result{}, r.c.Status().Update(ctx, vm)
}

// mergeVMConditions replaces the conditions with want, keeping transition times that did not change.
func mergeVMConditions(old, want []kubevirtv1.VirtualMachineCondition, now metav1.Time) []kubevirtv1.VirtualMachineCondition {
	out := make([]kubevirtv1.VirtualMachineCondition, 0, len(want))
	for _, w := range want {
		w.LastTransitionTime = now
		for _, o := range old {
			if o.Type == w.Type && o.Status == w.Status {
				w.LastTransitionTime, w.LastProbeTime = o.LastTransitionTime, o.LastProbeTime
			}
		}
		out = append(out, w)
	}
	return out
}

func condition(cs []kubevirtv1.VirtualMachineInstanceCondition, t kubevirtv1.VirtualMachineInstanceConditionType) corev1.ConditionStatus {
	for _, c := range cs {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func copyMap(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		out[k] = v
	}
	return out
}
