package cdi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The local-path provisioner the kind lane's classes name (rancher/local-path-provisioner, as
// kind v0.33.0 ships it), played for the claims of the classes that name it. It makes no disk: a
// node needs one, and the sim's nodes are kwok's.
const (
	// Provisioner is the provisioner name the classes carry.
	Provisioner = "rancher.io/local-path"
	// AnnStorageProvisioner is what kube-controller-manager's volume binder writes on a claim
	// it leaves to an external provisioner (k8s.io/kubernetes v1.35.4
	// pkg/controller/volume/persistentvolume/pv_controller.go, setClaimProvisioner, with the beta
	// key beside it).
	AnnStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	// AnnSelectedNode is what kube-scheduler writes on a claim of a WaitForFirstConsumer class once
	// it placed a pod using it (k8s.io/kubernetes v1.35.4
	// pkg/scheduler/framework/plugins/volumebinding/binder.go, AnnSelectedNode).
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnProvisionedBy marks a volume its provisioner made (sigs.k8s.io/sig-storage-lib-external-provisioner
	// v10 controller/controller.go, annDynamicallyProvisioned), which local-path-provisioner is
	// built on.
	AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// AnnLocalPathNode is the node local-path-provisioner records on a volume it made
	// (rancher/local-path-provisioner v0.0.37 provisioner.go line 59, set at line 556).
	AnnLocalPathNode = "local.path.provisioner/selected-node"
	// localPathRoot is the node path kind configures its local-path-provisioner with (kind
	// v0.33.0 pkg/build/nodeimage/const_storage.go, config.json paths).
	localPathRoot = "/var/local-path-provisioner"
)

// SetupProvisioner registers the provisioner alone. nodePaths are the real Nodes on this host
// (internal/sim/node), each with the folder its volumes are made in (the provisioner's
// nodePathMap entry for it; every other node has localPathRoot): for a volume on one of them the
// provisioner does what its helper Pod's scripts do on the node, as kind v0.33.0 configures them
// (pkg/build/nodeimage/const_storage.go:191-198): the setup script's mkdir -m 0777 -p of the
// volume's folder before the volume exists (so a Pod of any user writes there: CDI's importer runs
// as 107, and a hostPath volume gets no fsGroup), and the teardown script's rm -rf of it once the
// released volume is deleted.
func SetupProvisioner(mgr manager.Manager, nodePaths map[string]string) error {
	return setupProvisioner(mgr, nodePaths)
}

// setupProvisioner provisions a volume for each claim kube-controller-manager hands to
// rancher.io/local-path once kube-scheduler selected its node, and deletes a released volume of
// reclaim policy Delete, as local-path-provisioner does through sig-storage-lib-external-provisioner.
func setupProvisioner(mgr manager.Manager, nodePaths map[string]string) error {
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetAnnotations()[AnnStorageProvisioner] == Provisioner || o.GetAnnotations()[AnnProvisionedBy] == Provisioner
	})
	c := mgr.GetClient()
	if err := ctrl.NewControllerManagedBy(mgr).Named("sim-local-path-provisioner").
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(ours)).
		Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			var pvc corev1.PersistentVolumeClaim
			if err := c.Get(ctx, req.NamespacedName, &pvc); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			return ctrl.Result{}, provision(ctx, c, &pvc, nodePaths)
		})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("sim-local-path-deleter").
		For(&corev1.PersistentVolume{}, builder.WithPredicates(ours)).
		Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			var pv corev1.PersistentVolume
			if err := c.Get(ctx, req.NamespacedName, &pv); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
				return ctrl.Result{}, nil
			}
			if _, real := nodePaths[pv.Annotations[AnnLocalPathNode]]; real && pv.Spec.HostPath != nil {
				if err := os.RemoveAll(pv.Spec.HostPath.Path); err != nil {
					return ctrl.Result{}, fmt.Errorf("volume %s: removing its folder on the real Node: %w", pv.Name, err)
				}
			}
			return ctrl.Result{}, client.IgnoreNotFound(c.Delete(ctx, &pv))
		}))
}

// provision creates pvc's volume as local-path-provisioner does (rancher/local-path-provisioner
// v0.0.37 provisioner.go provisionFor, lines 369-567): once kube-scheduler selected the claim's
// node (the classes are WaitForFirstConsumer), a hostPath volume (DirectoryOrCreate, line 706)
// under the node's path in folder <pv>_<namespace>_<claim> (line 408), a required node affinity
// on kubernetes.io/hostname (lines 520-547), the node in its annotation, the claim's access modes
// and size, Filesystem, and the class's reclaim policy. The provisioner library pre-binds it to
// the claim (claimRef) and kube-controller-manager binds the pair. It refuses every access mode
// but ReadWriteOnce and ReadWriteOncePod (lines 381-384); CDI never asks another of these
// classes, their StorageProfiles offering only ReadWriteOnce.
func provision(ctx context.Context, c client.Client, pvc *corev1.PersistentVolumeClaim, nodePaths map[string]string) error {
	node := pvc.Annotations[AnnSelectedNode]
	if pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending || node == "" || pvc.DeletionTimestamp != nil {
		return nil
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if cls := pvc.Spec.StorageClassName; cls != nil && *cls != "" {
		var sc storagev1.StorageClass
		if err := c.Get(ctx, client.ObjectKey{Name: *cls}, &sc); err != nil {
			return fmt.Errorf("claim %s/%s: StorageClass %s: %w", pvc.Namespace, pvc.Name, *cls, err)
		}
		if sc.ReclaimPolicy != nil {
			reclaim = *sc.ReclaimPolicy
		}
	}
	// The library names the volume pvc-<claim UID> (controller.go, getProvisionedVolumeNameForClaim).
	name := "pvc-" + string(pvc.UID)
	root, real := nodePaths[node]
	if !real {
		root = localPathRoot
	}
	path := filepath.Join(root, name+"_"+pvc.Namespace+"_"+pvc.Name)
	if real {
		if err := os.MkdirAll(path, 0o777); err != nil {
			return fmt.Errorf("claim %s/%s: the volume's folder on the real Node %s: %w", pvc.Namespace, pvc.Name, node, err)
		}
		if err := os.Chmod(path, 0o777); err != nil { // mkdir -m is not masked by the umask
			return err
		}
	}
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnProvisionedBy: Provisioner, AnnLocalPathNode: node}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			VolumeMode:                    &fs,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: path, Type: ptr(corev1.HostPathDirectoryOrCreate)}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
		},
	}
	if pvc.Spec.StorageClassName != nil {
		pv.Spec.StorageClassName = *pvc.Spec.StorageClassName
	}
	if err := c.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("claim %s/%s: volume %s: %w", pvc.Namespace, pvc.Name, name, err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
