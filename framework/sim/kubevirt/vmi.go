package kubevirt

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-e2e/framework/sim/faults"
	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/standin"
)

func setupVMI(mgr manager.Manager, env *simenv.Env) error {
	// A DataVolume changing phase wakes the VMI of its VM (same name).
	dvToVMI := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		for _, ref := range o.GetOwnerReferences() {
			if ref.Kind == "VirtualMachine" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
			}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).Named("sim-kubevirt-vmi").
		For(&kubevirtv1.VirtualMachineInstance{}).
		Owns(&corev1.Pod{}).
		Watches(&cdiv1.DataVolume{}, dvToVMI).
		Complete(&vmiReconciler{c: mgr.GetClient(), env: env, events: mgr.GetEventRecorder("virtualmachine-controller")})
}

type vmiReconciler struct {
	c      client.Client
	env    *simenv.Env
	events events.EventRecorder
}

// Launcher returns VMI vmi's virt-launcher Pod, or nil; never the temporary one.
func Launcher(ctx context.Context, c client.Reader, vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	pod, _, err := launchers(ctx, c, vmi)
	return pod, err
}

// launchers are VMI vmi's launcher Pod and its temporary one (a volume waiting for its first
// consumer), either nil.
func launchers(ctx context.Context, c client.Reader, vmi *kubevirtv1.VirtualMachineInstance) (pod, temp *corev1.Pod, err error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{LabelCreatedBy: string(vmi.UID)}); err != nil {
		return nil, nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case !metav1.IsControlledBy(p, vmi):
		case p.Annotations[AnnEphemeralProvisioning] == "true":
			temp = p
		default:
			pod = p
		}
	}
	return pod, temp, nil
}

// volumes says where the VMI's DataVolumes stand: all imported, or one waiting for its first
// consumer (kubevirt/kubevirt v1.8.4 pkg/virt-controller/watch/vmi/lifecycle.go:90).
func (r *vmiReconciler) volumes(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (ready, waitForConsumer bool, err error) {
	ready = true
	for _, v := range vmi.Spec.Volumes {
		if v.DataVolume == nil {
			continue
		}
		dv := &cdiv1.DataVolume{}
		if err := r.c.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: v.DataVolume.Name}, dv); err != nil {
			if apierrors.IsNotFound(err) {
				ready = false
				continue
			}
			return false, false, err
		}
		switch dv.Status.Phase {
		case cdiv1.Succeeded:
		case cdiv1.WaitForFirstConsumer, cdiv1.PendingPopulation:
			ready, waitForConsumer = false, true
		default:
			ready = false
		}
	}
	return ready, waitForConsumer, nil
}

func (r *vmiReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.c.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pod, temp, err := launchers(ctx, r.c, vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if vmi.DeletionTimestamp != nil {
		if temp != nil && temp.DeletionTimestamp == nil {
			if err := r.c.Delete(ctx, temp); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
		return r.shutdown(ctx, vmi, pod)
	}
	if controllerutil.AddFinalizer(vmi, VMIFinalizer) {
		return ctrl.Result{}, r.c.Update(ctx, vmi)
	}
	if vmi.IsFinal() {
		return ctrl.Result{}, nil
	}
	st := vmi.Status.DeepCopy()
	now := metav1.NewTime(r.env.Now())
	var requeue time.Duration
	ready, waitForConsumer := true, false
	if pod == nil {
		if ready, waitForConsumer, err = r.volumes(ctx, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !waitForConsumer && temp != nil && temp.DeletionTimestamp == nil {
		// The volume is bound: the temporary pod has done its part (lifecycle.go:187-188, :1053-1068).
		if err := r.c.Delete(ctx, temp); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		r.events.Eventf(vmi, nil, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "Deleted WaitForFirstConsumer temporary pod %s", temp.Name)
	}
	switch {
	case pod == nil && waitForConsumer:
		// A temporary launcher binds the volume (lifecycle.go:151-153): it is scheduled like the
		// real one, and what keeps it from being placed keeps the VM from starting.
		st.Phase = kubevirtv1.Pending
		if temp == nil {
			req, err := r.requests(ctx, vmi)
			if err != nil {
				return ctrl.Result{}, err
			}
			if err := r.c.Create(ctx, newTemporaryLauncher(vmi, req)); err != nil {
				return ctrl.Result{}, fmt.Errorf("VMI %s/%s: temporary launcher pod: %w", vmi.Namespace, vmi.Name, err)
			}
			break
		}
		r.scheduling(ctx, vmi, temp, st, now)
	case pod == nil && !ready:
		st.Phase = kubevirtv1.Pending // its DataVolumes import
	case pod == nil:
		req, err := r.requests(ctx, vmi)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.c.Create(ctx, newLauncher(vmi, req)); err != nil {
			return ctrl.Result{}, fmt.Errorf("VMI %s/%s: launcher pod: %w", vmi.Namespace, vmi.Name, err)
		}
		st.Phase = kubevirtv1.Scheduling
		setCond(st, kubevirtv1.VirtualMachineInstanceReady, corev1.ConditionFalse, "PodNotExists", "virt-launcher pod has not yet been scheduled", now)
	case pod.Status.Phase == corev1.PodFailed:
		st.Phase = kubevirtv1.Failed
		setCond(st, kubevirtv1.VirtualMachineInstanceReady, corev1.ConditionFalse, "PodTerminating", "virt-launcher pod failed", now)
	case pod.Spec.NodeName == "":
		st.Phase = kubevirtv1.Scheduling
		r.scheduling(ctx, vmi, pod, st, now)
	default:
		st.NodeName = pod.Spec.NodeName
		removeCond(st, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled))
		if st.Phase != kubevirtv1.Running {
			st.Phase = kubevirtv1.Scheduled
		}
		if running, at := podReady(pod); running && st.Phase != kubevirtv1.Running {
			if wait := r.env.Latency(LatencyStart) - since(r.env, at); wait > 0 {
				requeue = wait
				break
			}
			st.Phase = kubevirtv1.Running
			st.ActivePods = map[types.UID]string{pod.UID: pod.Spec.NodeName}
			st.LauncherContainerImageVersion = LauncherImage
			st.QOSClass = ptr(corev1.PodQOSBurstable)
			st.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{
				Name: "default", InterfaceName: "eth0", IP: pod.Status.PodIP, IPs: []string{pod.Status.PodIP},
				MAC: mac(vmi.UID), InfoSource: "domain, guest-agent", QueueCount: 1,
			}}
			setCond(st, kubevirtv1.VirtualMachineInstanceReady, corev1.ConditionTrue, "", "", now)
			setCond(st, kubevirtv1.VirtualMachineInstanceIsMigratable, corev1.ConditionFalse, "DisksNotLiveMigratable",
				"cannot migrate VMI: PVC is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", now)
		}
	}
	if st.Phase != vmi.Status.Phase {
		st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps, kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: st.Phase, PhaseTransitionTimestamp: now})
	}
	if !equality.Semantic.DeepEqual(st, &vmi.Status) {
		vmi.Status = *st
		if err := r.c.Status().Update(ctx, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// requests are the launcher's requests; under fault vmi-unschedulable the memory asked for is
// more than any management node has.
func (r *vmiReconciler) requests(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (corev1.ResourceList, error) {
	req := Requests(vmi)
	pool, err := standin.PoolOf(ctx, r.c, vmi.Namespace, vmi.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err == nil && pool.Active(r.env, faults.VMIUnschedulable) {
		q, err := oversized(ctx, r.c)
		if err != nil {
			return nil, err
		}
		req[corev1.ResourceMemory] = q
	}
	return req, nil
}

// scheduling mirrors a launcher's PodScheduled=False onto the VMI, as KubeVirt does.
func (r *vmiReconciler) scheduling(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, st *kubevirtv1.VirtualMachineInstanceStatus, now metav1.Time) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			if old := condOf(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled)); old == nil || old.Message != c.Message {
				r.observeUnschedulable(ctx, vmi, pod, c)
			}
			setCond(st, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled), c.Status, c.Reason, c.Message, now)
		}
	}
}

func (r *vmiReconciler) observeUnschedulable(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, c corev1.PodCondition) {
	pool, err := standin.PoolOf(ctx, r.c, vmi.Namespace, vmi.Name)
	if err != nil || !pool.Active(r.env, faults.VMIUnschedulable) {
		return
	}
	_ = r.env.Observe(simenv.Observation{Fault: faults.VMIUnschedulable, Pool: pool.Name,
		Object: "Pod/" + pod.Namespace + "/" + pod.Name, Detail: c.Reason + ": " + c.Message})
}

// shutdown lets the guest power down for the shutdown latency, then deletes the launcher and,
// once it is gone, releases the VMI.
func (r *vmiReconciler) shutdown(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) (ctrl.Result, error) {
	if pod != nil {
		if pod.DeletionTimestamp != nil {
			return ctrl.Result{}, nil // its deletion brings us back
		}
		if pod.Status.Phase == corev1.PodRunning {
			if wait := r.env.Latency(LatencyShutdown) - since(r.env, vmi.DeletionTimestamp.Time); wait > 0 {
				return ctrl.Result{RequeueAfter: wait}, nil
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(r.c.Delete(ctx, pod))
	}
	if controllerutil.RemoveFinalizer(vmi, VMIFinalizer) {
		return ctrl.Result{}, client.IgnoreNotFound(r.c.Update(ctx, vmi))
	}
	return ctrl.Result{}, nil
}

func podReady(p *corev1.Pod) (bool, time.Time) {
	if p.Status.Phase != corev1.PodRunning {
		return false, time.Time{}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

func condOf(cs []kubevirtv1.VirtualMachineInstanceCondition, t kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstanceCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

func setCond(st *kubevirtv1.VirtualMachineInstanceStatus, t kubevirtv1.VirtualMachineInstanceConditionType, s corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	if c := condOf(st.Conditions, t); c != nil {
		if c.Status != s {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = s, reason, msg
		return
	}
	st.Conditions = append(st.Conditions, kubevirtv1.VirtualMachineInstanceCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: now, LastProbeTime: metav1.Time{}})
}

func removeCond(st *kubevirtv1.VirtualMachineInstanceStatus, t kubevirtv1.VirtualMachineInstanceConditionType) {
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}

// mac is a stable locally administered MAC for the VMI's interface.
func mac(uid types.UID) string {
	h := sha256.Sum256([]byte(uid))
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", h[0], h[1], h[2], h[3], h[4])
}
