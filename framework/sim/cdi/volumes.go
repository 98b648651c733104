package cdi

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// AnnSelectedNode is what kube-scheduler writes on a claim of a WaitForFirstConsumer class once it
// placed a pod using it (k8s.io/kubernetes pkg/scheduler/framework/plugins/volumebinding).
const AnnSelectedNode = "volume.kubernetes.io/selected-node"

// waitsForConsumer reports whether pvc's class binds on first consumer and no consumer has
// been placed yet.
func waitsForConsumer(ctx context.Context, c client.Client, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	cls := pvc.Spec.StorageClassName
	if cls == nil || *cls == "" || pvc.Annotations[AnnSelectedNode] != "" {
		return false, nil
	}
	var sc storagev1.StorageClass
	if err := c.Get(ctx, client.ObjectKey{Name: *cls}, &sc); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer, nil
}

// provision creates the PersistentVolume for pvc, pre-bound to it as a CSI provisioner would,
// so kube-controller-manager's binder binds the pair.
func provision(ctx context.Context, c client.Client, pvc *corev1.PersistentVolumeClaim) error {
	provisioner := Provisioner
	if cls := pvc.Spec.StorageClassName; cls != nil && *cls != "" {
		var sc storagev1.StorageClass
		if err := c.Get(ctx, client.ObjectKey{Name: *cls}, &sc); err == nil {
			provisioner = sc.Provisioner
		}
	}
	name := "pvc-" + string(pvc.UID)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnProvisionedBy: provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			VolumeMode:                    pvc.Spec.VolumeMode,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
		},
	}
	if node := pvc.Annotations[AnnSelectedNode]; node != "" {
		// A node-local volume on the node the consumer was placed on, as kind's local-path
		// provisioner makes one (rancher/local-path-provisioner: a hostPath PV with node affinity).
		pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/local-path-provisioner/" + name}}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}
	} else {
		pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: Provisioner, VolumeHandle: name}}
	}
	if pvc.Spec.StorageClassName != nil {
		pv.Spec.StorageClassName = *pvc.Spec.StorageClassName
	}
	if err := c.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// setupVolumeDeleter deletes the sim's volumes once their claim is gone (Released), as the CSI
// provisioner does for reclaim policy Delete.
func setupVolumeDeleter(mgr manager.Manager) error {
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetAnnotations()[AnnProvisionedBy]
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).Named("sim-cdi-volumes").
		For(&corev1.PersistentVolume{}, builder.WithPredicates(ours)).
		Complete(reconcilerFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			var pv corev1.PersistentVolume
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, &pv); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, client.IgnoreNotFound(mgr.GetClient().Delete(ctx, &pv))
		}))
}

type reconcilerFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcilerFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}
