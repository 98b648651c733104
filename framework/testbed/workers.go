package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Kinds a worker is made of, beside those framework/tenant names.
var (
	MachineGVK        = clusterv1.GroupVersion.WithKind("Machine")
	MachineSetGVK     = clusterv1.GroupVersion.WithKind("MachineSet")
	MachineDeployGVK  = clusterv1.GroupVersion.WithKind("MachineDeployment")
	MachineHealthGVK  = clusterv1.GroupVersion.WithKind("MachineHealthCheck")
	VirtualMachineGVK = kubevirtv1.GroupVersion.WithKind("VirtualMachine")
	VMIGVK            = kubevirtv1.GroupVersion.WithKind("VirtualMachineInstance")
	DataVolumeGVK     = schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"}
	PVCGVK            = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	SecretGVK         = corev1.SchemeGroupVersion.WithKind("Secret")
	NodeGVK           = corev1.SchemeGroupVersion.WithKind("Node")
	LeaseGVK          = schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}
)

// Timeouts are the product timeouts lane phase phase declares (budget.phases[].timeouts),
// each of names; a missing one is a *ConfigurationError naming the lane file.
func Timeouts(clock *budget.Clock, file, phase string, names ...string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, n := range names {
		d, err := clock.Timeout(phase, n)
		if err != nil {
			return nil, &ConfigurationError{File: file, Err: err}
		}
		out[n] = d
	}
	return out, nil
}

// StopWorker stops the worker's VirtualMachine as `virtctl stop` does for a VM that runs
// always: a JSON patch of spec.runStrategy from Always to Halted (kubevirt/kubevirt v1.8.4
// pkg/virt-api/rest/lifecycle.go:256-262, 665-676). KubeVirt deletes its VMI and the guest
// powers off; nothing starts it again. Its kubelet stops renewing the Node's Lease, so the
// tenant's node lifecycle controller marks the Node Ready=Unknown once its grace period has
// passed (kube-controller-manager --node-monitor-grace-period, 50s by default in v1.35:
// kubernetes v1.35.4 pkg/controller/nodelifecycle/config/v1alpha1/defaults.go:40-46), and the
// MachineHealthCheck's Ready=Unknown timeout marks the Machine. A deleted VMI alone would not
// do: under runStrategy Always KubeVirt starts a new one at once, and whether the Machine is
// replaced then races the guest's reboot against the timeouts.
func StopWorker(ctx context.Context, mgmt *cluster.Cluster, namespace, vm string) error {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/spec/runStrategy", "value": string(kubevirtv1.RunStrategyAlways)},
		{"op": "replace", "path": "/spec/runStrategy", "value": string(kubevirtv1.RunStrategyHalted)},
	})
	if err != nil {
		return err
	}
	obj := &kubevirtv1.VirtualMachine{}
	obj.Namespace, obj.Name = namespace, vm
	if err := mgmt.Client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("stopping VirtualMachine %s/%s (spec.runStrategy Always to Halted): %w", namespace, vm, err)
	}
	return nil
}

// ScaleMachineDeployment writes replicas through the MachineDeployment's scale subresource,
// as `kubectl scale` and the cluster-autoscaler do (the chart leaves spec.replicas to them:
// cozystack v1.6.1 packages/apps/kubernetes/templates/cluster.yaml:752-766).
func ScaleMachineDeployment(ctx context.Context, mgmt *cluster.Cluster, p tenant.PoolNames, replicas int) error {
	md := &clusterv1.MachineDeployment{}
	md.Namespace, md.Name = p.Namespace, p.MachineDeployment()
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: int32(replicas)}}
	if err := mgmt.Client.SubResource("scale").Update(ctx, md, client.WithSubResourceBody(scale)); err != nil {
		return fmt.Errorf("scaling MachineDeployment %s/%s to %d: %w", md.Namespace, md.Name, replicas, err)
	}
	return nil
}

// Worker is every object one worker is made of, by its Machine: what must be gone once the
// worker is removed.
type Worker struct {
	Machine string
	// VM is the KubevirtMachine's, VirtualMachine's and VMI's name.
	VM string
	// Node is the tenant Node it joined as ("" for none).
	Node string
	// Bootstrap is the bootstrap data Secret (and CAPK's <name>-userdata beside it).
	Bootstrap string
}

// WorkerOf is the worker of one Machine's record.
func WorkerOf(mr join.MachineRecord) Worker {
	w := Worker{Machine: mr.Machine.Name, VM: mr.Machine.Spec.InfrastructureRef.Name}
	if w.VM == "" {
		w.VM = mr.Machine.Name
	}
	if mr.Node != nil {
		w.Node = mr.Node.Name
	} else {
		w.Node = mr.Machine.Status.NodeRef.Name
	}
	if s := mr.Machine.Spec.Bootstrap.DataSecretName; s != nil {
		w.Bootstrap = *s
	}
	return w
}

// Refs are the objects of w to watch: in namespace on the management cluster its Machine,
// KubevirtMachine, VirtualMachine, VMI, DataVolume, PVC and bootstrap Secrets, and its Node
// on tenant (each a single-object watch).
func (w Worker) Refs(namespace string, tenantCluster *cluster.Cluster) []tenant.Ref {
	one := func(gvk schema.GroupVersionKind, name string) tenant.Ref {
		return tenant.Ref{GVK: gvk, Namespace: namespace, Name: name}
	}
	refs := []tenant.Ref{one(MachineGVK, w.Machine), one(tenant.KubevirtMachineGVK, w.VM), one(VirtualMachineGVK, w.VM),
		one(VMIGVK, w.VM), one(DataVolumeGVK, tenant.DataVolume(w.VM)), one(PVCGVK, tenant.DataVolume(w.VM))}
	if w.Bootstrap != "" {
		refs = append(refs, one(SecretGVK, w.Bootstrap), one(SecretGVK, w.Bootstrap+"-userdata"))
	}
	if w.Node != "" && tenantCluster != nil {
		refs = append(refs, tenant.Ref{GVK: NodeGVK, Name: w.Node, In: tenantCluster})
	}
	return refs
}

// Gone judges the removal of the objects watched as refs (those keep accepts, all when it is
// nil): done when none is left; a *tenant.Terminal of class leak as soon as one is held by
// finalizers no controller of the platform removes (Held), naming every object left, how long
// it has been deleting and its finalizers.
func Gone(refs []tenant.Ref, keep func(*unstructured.Unstructured) bool) tenant.Judge {
	return func(objs tenant.Objects) (bool, string, error) {
		now := time.Now()
		var left []*unstructured.Unstructured
		held := false
		for _, r := range refs {
			for _, o := range objs[r] {
				if keep == nil || keep(o) {
					left = append(left, o)
					held = held || Held(o)
				}
			}
		}
		if len(left) == 0 {
			return true, "nothing left", nil
		}
		detail := "left: " + strings.Join(Leftovers(left, now), "; ")
		if held {
			return false, detail, &tenant.Terminal{Class: verdict.Leak, Detail: detail}
		}
		return false, detail, nil
	}
}
