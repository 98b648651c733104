// Package vmsize plays the fault vmi-unschedulable: the pool's worker VMs ask for more memory
// than any management Node has, as if the platform had rendered the pool's machine template so.
// It sizes each KubevirtMachine of a targeted pool at admission, as Cluster API's MachineSet
// creates it: a mutating webhook, so no VirtualMachine CAPK makes can ever carry the size
// Cluster API asked for (a controller patching the KubevirtMachine afterwards raced CAPK, which
// makes the VirtualMachine as soon as the Machine's bootstrap data is ready:
// cluster-api-provider-kubevirt v0.1.10
// controllers/kubevirtmachine_controller.go lines 191-199, DataSecretName). The real virt-controller then sizes the launcher from the guest memory and
// KubeVirt's overhead, and the real scheduler leaves it Pending with "Insufficient memory",
// which virt-controller copies onto the VMI. The moment the launcher shows it is recorded by the
// virt-handler stand-in (internal/sim/kubevirt), which watches launchers.
package vmsize

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionapi "k8s.io/api/admission/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// SizedAnnotation marks a KubevirtMachine this package sized, with the size it gave.
const SizedAnnotation = "sim.cozy-e2e.io/vmi-unschedulable"

// Setup serves the sizing webhook on the world's webhook server when vmi-unschedulable is
// selected.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	if !env.Faults.Selected(faults.VMIUnschedulable) {
		return nil
	}
	if env.Webhooks == nil {
		return fmt.Errorf("vmsize: the fault %s sizes KubevirtMachines at admission, and this sim serves no webhooks", faults.VMIUnschedulable)
	}
	return env.Webhooks.Mutating(Webhook(mgr.GetAPIReader(), env))
}

// Webhook is the sizing webhook: on KubevirtMachine create, a targeted pool's machine gets twice
// the largest management Node's memory as its guest's (and as its memory request, if it has
// one). It reads the pool from the labels Cluster API's MachineSet gives the infrastructure
// machine, the Machine's (sigs.k8s.io/cluster-api v1.13.6
// internal/controllers/machineset/machineset_controller.go lines 1239-1258,
// machineLabelsFromMachineSet, and 1932-1941, GenerateTemplateInput), and whether it is a
// Kairos pool from the MachineSet that owns it (lines 1907-1915, the ownerReference of
// computeDesiredInfraMachine), through c.
func Webhook(c client.Reader, env *simenv.Env) simenv.Webhook {
	return simenv.Webhook{
		Name: "sim-vmsize.infrastructure.cluster.x-k8s.io",
		Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule: admissionv1.Rule{APIGroups: []string{names.KubevirtMachineGVK.Group}, APIVersions: []string{names.KubevirtMachineGVK.Version},
				Resources: []string{"kubevirtmachines"}},
		}},
		Handler: admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
			if req.Operation != admissionapi.Create {
				return admission.Allowed("")
			}
			km := &unstructured.Unstructured{}
			if err := km.UnmarshalJSON(req.Object.Raw); err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			targeted, err := isTargeted(ctx, c, env, km, req.Namespace)
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			if !targeted || km.GetAnnotations()[SizedAnnotation] != "" {
				return admission.Allowed("")
			}
			mem, err := oversized(ctx, c)
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			if err := size(km, mem); err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			sized, err := km.MarshalJSON()
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			return admission.PatchResponseFromRaw(req.Object.Raw, sized)
		}),
	}
}

// isTargeted reports whether vmi-unschedulable applies to the pool of km (in namespace).
func isTargeted(ctx context.Context, c client.Reader, env *simenv.Env, km *unstructured.Unstructured, namespace string) (bool, error) {
	labels := km.GetLabels()
	md := labels[clusterv1.MachineDeploymentNameLabel]
	if md == "" {
		return false, nil // not a pool's machine
	}
	pool := strings.TrimPrefix(md, labels[clusterv1.ClusterNameLabel]+"-")
	kairos := false
	for _, o := range km.GetOwnerReferences() {
		if o.Kind != "MachineSet" {
			continue
		}
		var ms clusterv1.MachineSet
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.Name}, &ms); err != nil {
			return false, fmt.Errorf("vmsize: reading MachineSet %s/%s, the owner of KubevirtMachine %s: %w", namespace, o.Name, km.GetName(), err)
		}
		// The MachineSet's template names the bootstrap config template (KairosConfigTemplate).
		kairos = strings.TrimSuffix(ms.Spec.Template.Spec.Bootstrap.ConfigRef.Kind, "Template") == names.KairosConfigGVK.Kind
	}
	return env.Faults.Active(faults.VMIUnschedulable, pool, kairos), nil
}

// size gives km's guest mem (and its memory request, if it has one), and marks it sized.
func size(km *unstructured.Unstructured, mem resource.Quantity) error {
	domain := []string{"spec", "virtualMachineTemplate", "spec", "template", "spec", "domain"}
	if err := unstructured.SetNestedField(km.Object, mem.String(), append(domain, "memory", "guest")...); err != nil {
		return err
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(km.Object, append(domain, "resources", "requests", "memory")...); found {
		if err := unstructured.SetNestedField(km.Object, mem.String(), append(domain, "resources", "requests", "memory")...); err != nil {
			return err
		}
	}
	ann := km.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[SizedAnnotation] = mem.String()
	km.SetAnnotations(ann)
	return nil
}

// oversized is twice the largest allocatable memory of the management Nodes.
func oversized(ctx context.Context, c client.Reader) (resource.Quantity, error) {
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
