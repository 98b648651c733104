package capk

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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

// nodePoll is how often CAPK looks for the tenant Node of a ready machine (the real one every
// 10 s); the sim looks faster so the join is observable within its latencies.
const nodePoll = 250 * time.Millisecond

func setupMachine(mgr manager.Manager, env *simenv.Env, tenants *standin.Tenants) error {
	toKM := func(name func(client.Object) string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if n := name(o); n != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: n}}}
			}
			return nil
		})
	}
	byLabel := func(o client.Object) string { return o.GetLabels()[LabelMachineName] }
	return ctrl.NewControllerManagedBy(mgr).Named("sim-capk-machine").
		For(newObj(names.KubevirtMachineGVK.Kind)).
		Watches(&clusterv1.Machine{}, toKM(func(o client.Object) string {
			if ref := o.(*clusterv1.Machine).Spec.InfrastructureRef; ref.Kind == names.KubevirtMachineGVK.Kind {
				return ref.Name
			}
			return ""
		})).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(names.KubevirtMachineGVK.GroupVersion().WithKind("KubevirtMachineList"))
			if err := mgr.GetClient().List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
				return nil
			}
			var out []reconcile.Request
			for _, it := range list.Items {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: it.GetNamespace(), Name: it.GetName()}})
			}
			return out
		})).
		Watches(&kubevirtv1.VirtualMachine{}, toKM(byLabel)).
		Watches(&kubevirtv1.VirtualMachineInstance{}, toKM(byLabel)).
		Watches(&cdiv1.DataVolume{}, toKM(func(o client.Object) string {
			for _, ref := range o.GetOwnerReferences() {
				if ref.Kind == "VirtualMachine" {
					return ref.Name
				}
			}
			return ""
		})).
		Complete(&machineReconciler{c: mgr.GetClient(), env: env, tenants: tenants})
}

type machineReconciler struct {
	c       client.Client
	env     *simenv.Env
	tenants *standin.Tenants
}

func (r *machineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	km := newObj(names.KubevirtMachineGVK.Kind)
	if err := r.c.Get(ctx, req.NamespacedName, km); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	machine := &clusterv1.Machine{}
	owner := ""
	for _, ref := range km.GetOwnerReferences() {
		if ref.Kind == "Machine" {
			owner = ref.Name
		}
	}
	if owner == "" {
		machine = nil
	} else if err := r.c.Get(ctx, client.ObjectKey{Namespace: km.GetNamespace(), Name: owner}, machine); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		machine = nil
	}
	if km.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, r.delete(ctx, km, machine)
	}
	if machine == nil {
		return ctrl.Result{}, nil // the Machine controller sets the owner reference
	}
	cluster := &clusterv1.Cluster{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: km.GetNamespace(), Name: machine.Spec.ClusterName}, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if controllerutil.AddFinalizer(km, MachineFinalizer) {
		return ctrl.Result{}, r.c.Update(ctx, km)
	}
	res, err := r.reconcileNormal(ctx, km, machine, cluster)
	if err != nil {
		return res, err
	}
	if err := r.c.Status().Update(ctx, km); err != nil {
		return ctrl.Result{}, err
	}
	if res.IsZero() {
		if ready, _, _ := unstructured.NestedBool(km.Object, "status", "ready"); ready {
			return r.updateNodeProviderID(ctx, km, cluster)
		}
	}
	return res, nil
}

// reconcileNormal brings km's VM about and its status up to date (status is written by the caller).
func (r *machineReconciler) reconcileNormal(ctx context.Context, km *unstructured.Unstructured, m *clusterv1.Machine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	notProvisioned := func(severity, reason, msg string) {
		_ = unstructured.SetNestedField(km.Object, false, "status", "ready")
		standin.SetConditions(km, r.env.Now(), standin.False("Ready", severity, reason, msg), standin.False(VMProvisioned, severity, reason, msg))
	}
	if p := cluster.Status.Initialization.InfrastructureProvisioned; p == nil || !*p {
		notProvisioned("Info", WaitingForInfra, "")
		return ctrl.Result{}, nil
	}
	if m.Spec.Bootstrap.DataSecretName == nil {
		if p := cluster.Status.Initialization.ControlPlaneInitialized; p == nil || !*p {
			notProvisioned("Info", WaitingForCP, "")
		} else {
			notProvisioned("Info", WaitingForBootstrap, "")
		}
		return ctrl.Result{}, nil
	}
	if err := r.userdata(ctx, km, m); err != nil {
		notProvisioned("Info", WaitingForBootstrap, err.Error())
		return ctrl.Result{}, err
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(km), vm); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		want, err := newVirtualMachine(km, m, cluster.Name)
		if err != nil {
			notProvisioned("Error", "VMCreateFailed", "Failed vm creation: "+err.Error())
			return ctrl.Result{}, nil
		}
		if err := r.c.Create(ctx, want); err != nil {
			notProvisioned("Error", "VMCreateFailed", "Failed vm creation: "+err.Error())
			return ctrl.Result{}, err
		}
		notProvisioned("Info", "VMNotReady", "VM is not ready")
		return ctrl.Result{}, nil // the VM's and VMI's changes bring us back
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(km), vmi); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	} else if err != nil {
		vmi = nil
	}
	if !vmiReady(vmi) {
		reason, msg := r.notReadyReason(ctx, vm)
		notProvisioned("Info", reason, msg)
		return ctrl.Result{}, nil
	}
	standin.SetConditions(km, r.env.Now(), standin.True("Ready"), standin.True(VMProvisioned))
	if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == "" {
		return ctrl.Result{}, nil
	}
	ip := vmi.Status.Interfaces[0].IP
	addrs := []any{}
	for _, a := range [][2]string{{"Hostname", km.GetName()}, {"InternalIP", ip}, {"ExternalIP", ip}, {"InternalDNS", km.GetName()}} {
		addrs = append(addrs, map[string]any{"type": a[0], "address": a[1]})
	}
	_ = unstructured.SetNestedSlice(km.Object, addrs, "status", "addresses")
	if id, _, _ := unstructured.NestedString(km.Object, "spec", "providerID"); id == "" {
		// Set ProviderID so the Cluster API Machine controller can pull it.
		status := km.Object["status"]
		_ = unstructured.SetNestedField(km.Object, names.ProviderID(km.GetName()), "spec", "providerID")
		if err := r.c.Update(ctx, km); err != nil {
			return ctrl.Result{}, err
		}
		km.Object["status"] = status
	}
	_ = unstructured.SetNestedField(km.Object, true, "status", "ready")
	migratable := standin.False(VMLiveMigratable, "Info", "DisksNotLiveMigratable", km.GetName()+" is not a live migratable machine")
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceIsMigratable {
			if c.Status == corev1.ConditionTrue {
				migratable = standin.True(VMLiveMigratable)
			} else {
				migratable = standin.False(VMLiveMigratable, "Info", c.Reason, fmt.Sprintf("%s is not a live migratable machine: %s", km.GetName(), c.Message))
			}
		}
	}
	standin.SetConditions(km, r.env.Now(), migratable)
	return ctrl.Result{}, nil
}

func vmiReady(vmi *kubevirtv1.VirtualMachineInstance) bool {
	if vmi == nil || vmi.DeletionTimestamp != nil {
		return false
	}
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// notReadyReason is CAPK's GetVMNotReadyReason: the VM's scheduling failure, else the first
// DataVolume that is not imported.
func (r *machineReconciler) notReadyReason(ctx context.Context, vm *kubevirtv1.VirtualMachine) (string, string) {
	msg := "VM is not ready: " + string(vm.Status.PrintableStatus)
	for _, c := range vm.Status.Conditions {
		if string(c.Type) == string(corev1.PodScheduled) && c.Status == corev1.ConditionFalse && c.Reason == "Unschedulable" {
			return "Unschedulable", c.Message
		}
	}
	for _, t := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{}
		if err := r.c.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: t.Name}, dv); err != nil {
			continue
		}
		m := fmt.Sprintf("DataVolume %s is not ready; Phase: %s", dv.Name, dv.Status.Phase)
		switch dv.Status.Phase {
		case cdiv1.Succeeded:
			continue
		case cdiv1.Pending:
			return "DVPending", m
		case cdiv1.Failed:
			return "DVFailed", m
		}
		reason := "DVNotReady"
		for _, c := range dv.Status.Conditions {
			if c.Type == cdiv1.DataVolumeRunning && c.Status == corev1.ConditionFalse {
				if c.Reason == "ImagePullFailed" {
					reason = "DVImagePullFailed"
				}
				m = fmt.Sprintf("DataVolume %s import is not running: %s", dv.Name, c.Message)
			}
		}
		return reason, m
	}
	return "VMNotReady", msg
}

// userdata writes Secret <dataSecretName>-userdata (key userdata) from the bootstrap data.
func (r *machineReconciler) userdata(ctx context.Context, km *unstructured.Unstructured, m *clusterv1.Machine) error {
	src := &corev1.Secret{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: *m.Spec.Bootstrap.DataSecretName}, src); err != nil {
		return fmt.Errorf("failed to retrieve bootstrap data secret for KubevirtMachine %s/%s: %w", km.GetNamespace(), km.GetName(), err)
	}
	value, ok := src.Data["value"]
	if !ok {
		return fmt.Errorf("error retrieving bootstrap data: secret value key is missing")
	}
	dst := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: km.GetNamespace(), Name: src.Name + "-userdata"}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.c, dst, func() error {
		dst.Labels = src.Labels
		dst.Type = clusterv1.ClusterSecretType
		dst.Data = map[string][]byte{"userdata": value}
		return nil
	})
	return err
}

// delete removes the userdata Secret and the VM, then the finalizer, as CAPK's reconcileDelete.
func (r *machineReconciler) delete(ctx context.Context, km *unstructured.Unstructured, m *clusterv1.Machine) error {
	if m != nil && m.Spec.Bootstrap.DataSecretName != nil {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: km.GetNamespace(), Name: *m.Spec.Bootstrap.DataSecretName + "-userdata"}}
		if err := r.c.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: km.GetNamespace(), Name: km.GetName()}}
	if err := r.c.Delete(ctx, vm); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete VM %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	if controllerutil.RemoveFinalizer(km, MachineFinalizer) {
		return client.IgnoreNotFound(r.c.Update(ctx, km))
	}
	return nil
}

// updateNodeProviderID patches spec.providerID onto the tenant Node named like the
// KubevirtMachine, as CAPK does for lack of a KubeVirt cloud provider. A Node named otherwise
// never gets one.
func (r *machineReconciler) updateNodeProviderID(ctx context.Context, km *unstructured.Unstructured, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	if done, _, _ := unstructured.NestedBool(km.Object, "status", "nodeupdated"); done {
		return ctrl.Result{}, nil
	}
	wc, err := r.tenants.Client(ctx, r.c, cluster.Namespace, cluster.Name)
	if err != nil {
		return ctrl.Result{RequeueAfter: nodePoll}, nil // waiting for the workload cluster client
	}
	node := &corev1.Node{}
	if err := wc.Get(ctx, client.ObjectKey{Name: km.GetName()}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{RequeueAfter: nodePoll}, nil // waiting for the workload cluster node
		}
		return ctrl.Result{}, fmt.Errorf("failed to fetch workload cluster node %s: %w", km.GetName(), err)
	}
	id, _, _ := unstructured.NestedString(km.Object, "spec", "providerID")
	if node.Spec.ProviderID != id {
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"providerID":%q}}`, id)))
		if err := wc.Patch(ctx, node, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to patch workload cluster node %s: %w", node.Name, err)
		}
	}
	_ = unstructured.SetNestedField(km.Object, true, "status", "nodeupdated")
	return ctrl.Result{}, r.c.Status().Update(ctx, km)
}
