package kubevirt

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
)

// vmiCrashed is the event virt-handler records when a VMI's phase turns Failed (kubevirt/kubevirt
// v1.8.4 pkg/virt-handler/controller.go line 75, vm.go lines 1139-1140: type Warning, reason
// Stopped).
const vmiCrashed = "The VirtualMachineInstance crashed."

// domains plays the domain of each launcher Pod: one reconcile per launcher (the key), reading
// the VMI that controls it. virt-handler syncs a VMI with the domain its launcher runs; here
// the launcher's Pod is the domain.
type domains struct {
	c      client.Client
	env    *simenv.Env
	events events.EventRecorder

	mu sync.Mutex
	// crashed are the pools whose one crash under vmi-crash-once happened.
	crashed map[string]bool
	// observed are the launchers whose unschedulable state under vmi-unschedulable is recorded.
	observed map[types.UID]bool
}

// handlerWorkers is how many VMIs one virt-handler syncs at once: its VMI controller runs 10
// workers (kubevirt/kubevirt v1.8.4 cmd/virt-handler/virt-handler.go:508, vmController.Run(10,
// stop)). There is one virt-handler per Node; the stand-in plays the handlers of every management
// Node, so it runs as many workers as they would together, and one launcher's domain never waits
// for another's.
const handlerWorkers = 10

func setupHandler(mgr manager.Manager, env *simenv.Env) error {
	d := &domains{c: mgr.GetClient(), env: env, events: mgr.GetEventRecorder("virt-handler"), crashed: map[string]bool{}, observed: map[types.UID]bool{}}
	// A VMI's change wakes its launchers (virt-controller hands a VMI over as Scheduled).
	vmiToLaunchers := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var pods corev1.PodList
		if err := d.c.List(ctx, &pods, client.InNamespace(o.GetNamespace()), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(o.GetUID())}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, p := range pods.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).Named("sim-virt-handler").
		For(&corev1.Pod{}).
		Watches(&kubevirtv1.VirtualMachineInstance{}, vmiToLaunchers).
		WithOptions(controller.Options{MaxConcurrentReconciles: handlerWorkers * len(world.DefaultNodes())}).
		Complete(d)
}

func (d *domains) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := d.c.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ref := metav1.GetControllerOf(pod)
	// A real Node's virt-handler syncs the VMIs handed to it.
	if ref == nil || ref.Kind != "VirtualMachineInstance" || pod.DeletionTimestamp != nil || d.env.RealNode(pod.Spec.NodeName) {
		return ctrl.Result{}, nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pool, err := standin.PoolOf(ctx, d.c, vmi.Namespace, vmi.Name)
	known := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if known && pool.Active(d.env, faults.VMIUnschedulable) {
		d.observeUnschedulable(pod, pool)
	}
	// virt-handler syncs only the VMIs virt-controller handed to its Node, until they are final
	// or deleted (pkg/virt-handler/vm.go lines 1054-1060).
	if temporary(pod) || vmi.UID != ref.UID || vmi.IsFinal() || vmi.DeletionTimestamp != nil || vmi.Status.NodeName == "" || vmi.Status.NodeName != pod.Spec.NodeName {
		return ctrl.Result{}, nil
	}
	switch vmi.Status.Phase {
	case kubevirtv1.Scheduled:
		running, since := podReady(pod)
		if !running {
			return ctrl.Result{}, nil
		}
		if wait := d.env.Latency(LatencyStart) - d.env.Now().Sub(since); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if known && pool.Active(d.env, faults.VMICrashLoop) {
			return ctrl.Result{}, d.crash(ctx, vmi, pool, faults.VMICrashLoop, "the domain crashed as it started")
		}
		return ctrl.Result{}, d.started(ctx, vmi, pod)
	case kubevirtv1.Running:
		if !known || !pool.Active(d.env, faults.VMICrashOnce) || !d.claimCrash(pool) {
			return ctrl.Result{}, nil
		}
		if wait := d.env.Latency(LatencyCrash) - d.env.Now().Sub(runningSince(vmi)); wait > 0 {
			d.releaseCrash(pool)
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if err := d.crash(ctx, vmi, pool, faults.VMICrashOnce, "the running domain crashed"); err != nil {
			// Not crashed (a stale VMI, say): the next reconcile tries again.
			d.releaseCrash(pool)
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, nil
}

// started marks vmi Running with what virt-handler reports of a started domain without a guest
// agent: the phase (vm.go lines 2214-2216: a domain Running is phase Running), the interfaces of
// the domain with the pod's address (pkg/network/setup/netstat.go lines 92-133, 277-290:
// name, MAC, infoSource domain, one queue, link up, and the pod interface's IPs from the cache
// written at network setup), and whether it can migrate (vm.go lines 720-744: a PVC that is not
// ReadWriteMany makes it not migratable, lines 1775-1795).
func (d *domains) started(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) error {
	now := metav1.NewTime(d.env.Now())
	vmi = vmi.DeepCopy()
	st := &vmi.Status
	st.Phase = kubevirtv1.Running
	st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps,
		kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: now})
	podNetwork := ""
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			podNetwork = n.Name
		}
	}
	var ifaces []kubevirtv1.VirtualMachineInstanceNetworkInterface
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		ifc := kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: i.Name, MAC: i.MacAddress, InfoSource: "domain", QueueCount: 1, LinkState: "up"}
		if ifc.MAC == "" {
			ifc.MAC = mac(vmi.UID, i.Name)
		}
		if i.Name == podNetwork {
			ifc.IP = pod.Status.PodIP
			for _, ip := range pod.Status.PodIPs {
				ifc.IPs = append(ifc.IPs, ip.IP)
			}
			for _, old := range st.Interfaces {
				if old.Name == i.Name {
					ifc.PodInterfaceName = old.PodInterfaceName
				}
			}
		}
		ifaces = append(ifaces, ifc)
	}
	st.Interfaces = ifaces
	for _, v := range vmi.Spec.Volumes {
		claim := ""
		switch {
		case v.DataVolume != nil:
			claim = v.DataVolume.Name
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		}
		if claim != "" {
			setCondition(st, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse,
				Reason:  kubevirtv1.VirtualMachineInstanceReasonDisksNotMigratable,
				Message: fmt.Sprintf("cannot migrate VMI: PVC %s is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", claim)})
			break
		}
	}
	if err := d.c.Update(ctx, vmi); err != nil {
		return err
	}
	d.events.Eventf(vmi, nil, corev1.EventTypeNormal, string(kubevirtv1.Started), "Started", "VirtualMachineInstance started.")
	return nil
}

// crash fails vmi as virt-handler does when its domain stops with reason crashed (vm.go lines
// 2198-2201: phase Failed), with its Warning event, and records the fault.
func (d *domains) crash(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, pool standin.Pool, f faults.Name, what string) error {
	vmi = vmi.DeepCopy()
	vmi.Status.Phase = kubevirtv1.Failed
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
		kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: kubevirtv1.Failed, PhaseTransitionTimestamp: metav1.NewTime(d.env.Now())})
	if err := d.c.Update(ctx, vmi); err != nil {
		return err
	}
	d.events.Eventf(vmi, nil, corev1.EventTypeWarning, string(kubevirtv1.Stopped), "Crashed", vmiCrashed)
	return d.env.Observe(simenv.Observation{Fault: f, Pool: pool.Name, Object: "VirtualMachineInstance/" + vmi.Namespace + "/" + vmi.Name,
		UID: string(vmi.UID), Detail: what + ": VMI Failed"})
}

// observeUnschedulable records, once per launcher, the moment the scheduler said it cannot
// place a launcher of a pool vmi-unschedulable targets (internal/sim/vmsize sized its VM).
func (d *domains) observeUnschedulable(pod *corev1.Pod, pool standin.Pool) {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		d.mu.Lock()
		seen := d.observed[pod.UID]
		d.observed[pod.UID] = true
		d.mu.Unlock()
		if !seen {
			_ = d.env.Observe(simenv.Observation{Fault: faults.VMIUnschedulable, Pool: pool.Name,
				Object: "Pod/" + pod.Namespace + "/" + pod.Name, UID: string(pod.UID), Detail: c.Reason + ": " + c.Message})
		}
	}
}

// claimCrash reports whether pool's one crash is still to happen, and claims it.
func (d *domains) claimCrash(pool standin.Pool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := pool.Namespace + "/" + pool.Cluster + "/" + pool.Name
	if d.crashed[key] {
		return false
	}
	d.crashed[key] = true
	return true
}

func (d *domains) releaseCrash(pool standin.Pool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.crashed, pool.Namespace+"/"+pool.Cluster+"/"+pool.Name)
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

func runningSince(vmi *kubevirtv1.VirtualMachineInstance) time.Time {
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == kubevirtv1.Running {
			return t.PhaseTransitionTimestamp.Time
		}
	}
	return time.Time{}
}

func setCondition(st *kubevirtv1.VirtualMachineInstanceStatus, c kubevirtv1.VirtualMachineInstanceCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// mac is the address libvirt gives an interface without one, in QEMU's range 52:54:00 (stable
// per VMI and interface here).
func mac(uid types.UID, iface string) string {
	h := sha256.Sum256([]byte(string(uid) + "/" + iface))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}
