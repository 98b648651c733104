package cdi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-e2e/framework/sim/names"
	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/standin"
)

func setupDataVolume(mgr manager.Manager, env *simenv.Env) error {
	// The importer Pod is owned by the PVC, which the DataVolume owns and names alike.
	podToDV := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		dv, ok := strings.CutPrefix(o.GetName(), names.ImporterPrefix)
		if !ok || o.GetLabels()["app"] != "containerized-data-importer" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: dv}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("sim-cdi-datavolume").
		For(&cdiv1.DataVolume{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Watches(&corev1.Pod{}, podToDV).
		Complete(&dvReconciler{c: mgr.GetClient(), env: env, events: mgr.GetEventRecorder("datavolume-import-controller")})
}

type dvReconciler struct {
	c      client.Client
	env    *simenv.Env
	events events.EventRecorder
	// attempts holds when each refused importer's container last started or failed: Pod
	// status times are whole seconds, too coarse for the sim's latencies.
	attempts sync.Map // types.UID -> time.Time
}

// dropImporter deletes the importer of a DataVolume going away, as CDI cleans up after a PVC
// being deleted: the kubelet's pod keeps the pvc-protection finalizer on the PVC otherwise.
func (r *dvReconciler) dropImporter(ctx context.Context, namespace, name string) error {
	pod := &corev1.Pod{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	if pod.DeletionTimestamp != nil {
		return nil
	}
	return client.IgnoreNotFound(r.c.Delete(ctx, pod))
}

func (r *dvReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dv := &cdiv1.DataVolume{}
	if err := r.c.Get(ctx, req.NamespacedName, dv); (err != nil && apierrors.IsNotFound(err)) || (err == nil && dv.DeletionTimestamp != nil) {
		return ctrl.Result{}, r.dropImporter(ctx, req.Namespace, names.ImporterPod(req.Name))
	} else if err != nil {
		return ctrl.Result{}, err
	}
	src, err := sourceOf(dv)
	if err != nil {
		return ctrl.Result{}, r.setStatus(ctx, dv, cdiv1.Pending, "", cond(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "InvalidSource", err.Error()))
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.c.Get(ctx, req.NamespacedName, pvc); apierrors.IsNotFound(err) {
		if pvc, err = r.createPVC(ctx, dv, src); err != nil {
			return ctrl.Result{}, err
		}
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		if waits, err := waitsForConsumer(ctx, r.c, pvc); err != nil {
			return ctrl.Result{}, err
		} else if waits {
			// CDI without volume populators (Cozystack opts out per DataVolume) leaves a claim of
			// a WaitForFirstConsumer class unbound until a pod using it is scheduled, and says so
			// (pkg/controller/datavolume/controller-base.go:1010); KubeVirt's temporary launcher
			// is that pod.
			return ctrl.Result{}, r.setStatus(ctx, dv, cdiv1.WaitForFirstConsumer, "N/A",
				cond(cdiv1.DataVolumeBound, corev1.ConditionFalse, "Pending", "PVC "+pvc.Name+" Pending"),
				cond(cdiv1.DataVolumeReady, corev1.ConditionFalse, "", ""), cond(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "", ""))
		}
		if err := provision(ctx, r.c, pvc); err != nil {
			return ctrl.Result{}, fmt.Errorf("DataVolume %s/%s: volume for PVC %s: %w", dv.Namespace, dv.Name, pvc.Name, err)
		}
		return ctrl.Result{}, r.setStatus(ctx, dv, cdiv1.Pending, "N/A",
			cond(cdiv1.DataVolumeBound, corev1.ConditionFalse, "Pending", "PVC "+pvc.Name+" Pending"),
			cond(cdiv1.DataVolumeReady, corev1.ConditionFalse, "", ""), cond(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "", ""))
	}
	bound := cond(cdiv1.DataVolumeBound, corev1.ConditionTrue, "Bound", "PVC "+pvc.Name+" Bound")
	pod := &corev1.Pod{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: dv.Namespace, Name: names.ImporterPod(dv.Name)}, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if dv.Status.Phase == cdiv1.Succeeded {
		if pod != nil && pod.DeletionTimestamp == nil {
			return ctrl.Result{}, client.IgnoreNotFound(r.c.Delete(ctx, pod)) // CDI does not keep a finished importer
		}
		return ctrl.Result{}, nil
	}
	if pod == nil {
		if err := r.c.Create(ctx, newImporter(dv, pvc, src)); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("DataVolume %s/%s: importer pod: %w", dv.Namespace, dv.Name, err)
		}
		return ctrl.Result{}, r.setStatus(ctx, dv, cdiv1.ImportScheduled, "N/A", bound,
			cond(cdiv1.DataVolumeReady, corev1.ConditionFalse, "", ""), cond(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "", ""))
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		if err := r.annotate(ctx, pvc, pod, "false", "Completed", ""); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.setStatus(ctx, dv, cdiv1.Succeeded, "100.0%", bound,
			cond(cdiv1.DataVolumeReady, corev1.ConditionTrue, "", ""), cond(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "Completed", "Import Complete"))
	case corev1.PodRunning:
		pool, err := standin.PoolOf(ctx, r.c, dv.Namespace, ownerVM(dv))
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		imp := &importer{r: r, dv: dv, pvc: pvc, pod: pod, src: src, pool: pool, known: err == nil}
		return imp.step(ctx, bound)
	default:
		return ctrl.Result{}, r.setStatus(ctx, dv, cdiv1.ImportScheduled, "N/A", bound,
			cond(cdiv1.DataVolumeReady, corev1.ConditionFalse, "", ""), cond(cdiv1.DataVolumeRunning, corev1.ConditionFalse, "", ""))
	}
}

// source is where a DataVolume imports from.
type source struct {
	kind string // "http" or "registry"
	url  string
}

func sourceOf(dv *cdiv1.DataVolume) (source, error) {
	s := dv.Spec.Source
	switch {
	case s != nil && s.HTTP != nil:
		return source{"http", s.HTTP.URL}, nil
	case s != nil && s.Registry != nil && s.Registry.URL != nil:
		return source{"registry", *s.Registry.URL}, nil
	}
	return source{}, fmt.Errorf("DataVolume %s/%s: spec.source: the sim imports from http or registry sources", dv.Namespace, dv.Name)
}

func ownerVM(dv *cdiv1.DataVolume) string {
	for _, ref := range dv.OwnerReferences {
		if ref.Kind == "VirtualMachine" {
			return ref.Name
		}
	}
	return dv.Name
}

// createPVC creates the DataVolume's claim as CDI does (same name, owned by the DataVolume).
func (r *dvReconciler) createPVC(ctx context.Context, dv *cdiv1.DataVolume, src source) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: dv.Namespace, Name: dv.Name,
		Labels: map[string]string{"app": "containerized-data-importer", "app.kubernetes.io/component": "storage", "app.kubernetes.io/managed-by": "cdi-controller"},
		Annotations: map[string]string{
			AnnEndpoint: src.url, AnnSource: src.kind, AnnContentType: "kubevirt", AnnImportPod: names.ImporterPod(dv.Name),
			AnnCreatedForDV: string(dv.UID), AnnPodRestarts: "0", "cdi.kubevirt.io/storage.usePopulator": "false",
		},
	}}
	switch {
	case dv.Spec.Storage != nil:
		pvc.Spec.AccessModes, pvc.Spec.StorageClassName, pvc.Spec.VolumeMode = dv.Spec.Storage.AccessModes, dv.Spec.Storage.StorageClassName, dv.Spec.Storage.VolumeMode
		pvc.Spec.Resources.Requests = dv.Spec.Storage.Resources.Requests
	case dv.Spec.PVC != nil:
		pvc.Spec = *dv.Spec.PVC.DeepCopy()
	}
	if len(pvc.Spec.AccessModes) == 0 {
		pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	if pvc.Spec.VolumeMode == nil {
		fs := corev1.PersistentVolumeFilesystem
		pvc.Spec.VolumeMode = &fs
	}
	if _, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}
	}
	if err := controllerutil.SetControllerReference(dv, pvc, r.c.Scheme()); err != nil {
		return nil, err
	}
	if err := r.c.Create(ctx, pvc); err != nil {
		return nil, fmt.Errorf("DataVolume %s/%s: PVC: %w", dv.Namespace, dv.Name, err)
	}
	r.event(dv, corev1.EventTypeNormal, "Pending", "PVC "+pvc.Name+" Pending")
	return pvc, nil
}

// annotate mirrors the importer's state onto the PVC as CDI's import controller does.
func (r *dvReconciler) annotate(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pod *corev1.Pod, running, reason, msg string) error {
	want := map[string]string{AnnPodPhase: string(pod.Status.Phase), AnnRunningCondition: running,
		AnnRunningCondition + ".reason": reason, AnnRunningCondition + ".message": msg}
	if cs := pod.Status.ContainerStatuses; len(cs) > 0 {
		want[AnnPodRestarts] = strconv.Itoa(int(cs[0].RestartCount))
	}
	changed := false
	for k, v := range want {
		if pvc.Annotations[k] != v {
			pvc.Annotations[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	return r.c.Update(ctx, pvc)
}

// setStatus writes the DataVolume's phase, progress and conditions, and the events CDI emits
// on a phase change.
func (r *dvReconciler) setStatus(ctx context.Context, dv *cdiv1.DataVolume, phase cdiv1.DataVolumePhase, progress string, cs ...cdiv1.DataVolumeCondition) error {
	return r.setStatusRestarts(ctx, dv, phase, progress, dv.Status.RestartCount, cs...)
}

// setStatusRestarts is setStatus with the importer's restart count.
func (r *dvReconciler) setStatusRestarts(ctx context.Context, dv *cdiv1.DataVolume, phase cdiv1.DataVolumePhase, progress string, restarts int32, cs ...cdiv1.DataVolumeCondition) error {
	st := dv.Status.DeepCopy()
	st.Phase, st.RestartCount = phase, restarts
	if progress != "" {
		st.Progress = cdiv1.DataVolumeProgress(progress)
	}
	now := metav1.NewTime(r.env.Now())
	for _, c := range cs {
		st.Conditions = setCondition(st.Conditions, c, now)
	}
	if equality.Semantic.DeepEqual(st, &dv.Status) {
		return nil
	}
	old := dv.Status.Phase
	dv.Status = *st
	if err := r.c.Status().Update(ctx, dv); err != nil {
		return err
	}
	if old != phase {
		switch phase {
		case cdiv1.ImportScheduled:
			r.event(dv, corev1.EventTypeNormal, "ImportScheduled", "Import into "+dv.Name+" scheduled")
		case cdiv1.ImportInProgress:
			r.event(dv, corev1.EventTypeNormal, "ImportInProgress", "Import into "+dv.Name+" in progress")
		case cdiv1.Succeeded:
			r.event(dv, corev1.EventTypeNormal, "ImportSucceeded", "Successfully imported into PVC "+dv.Name)
		}
	}
	return nil
}

func (r *dvReconciler) event(obj runtime.Object, typ, reason, note string) {
	r.events.Eventf(obj, nil, typ, reason, "Import", "%s", note)
}

func cond(t cdiv1.DataVolumeConditionType, s corev1.ConditionStatus, reason, msg string) cdiv1.DataVolumeCondition {
	return cdiv1.DataVolumeCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

// setCondition is CDI's updateCondition: the transition time moves with the status, the
// heartbeat with any change.
func setCondition(cs []cdiv1.DataVolumeCondition, c cdiv1.DataVolumeCondition, now metav1.Time) []cdiv1.DataVolumeCondition {
	for i := range cs {
		if cs[i].Type != c.Type {
			continue
		}
		if cs[i].Status != c.Status {
			cs[i].LastTransitionTime, cs[i].LastHeartbeatTime = now, now
		} else if cs[i].Reason != c.Reason || cs[i].Message != c.Message || !c.LastHeartbeatTime.IsZero() {
			cs[i].LastHeartbeatTime = now
		}
		cs[i].Status, cs[i].Reason, cs[i].Message = c.Status, c.Reason, c.Message
		return cs
	}
	c.LastTransitionTime, c.LastHeartbeatTime = now, now
	return append(cs, c)
}

func heartbeat(cs []cdiv1.DataVolumeCondition, t cdiv1.DataVolumeConditionType) time.Time {
	for _, c := range cs {
		if c.Type == t {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}
