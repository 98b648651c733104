package testbed

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// releasedBy are the finalizers the platform's own controllers put on what a tenant is made
// of, each with who removes it. A finalizer that is not here has no controller of the
// platform behind it: an object it alone holds stays for good. A new component's finalizer
// belongs here, with its source.
var releasedBy = map[string]string{
	// Kubernetes (k8s.io/apimachinery v0.35.4 pkg/apis/meta/v1/types.go FinalizerOrphanDependents,
	// FinalizerDeleteDependents; kubernetes v1.35.4 pkg/controller/volume/pvcprotection, pvprotection).
	"orphan":                       "the garbage collector",
	"foregroundDeletion":           "the garbage collector",
	"kubernetes.io/pvc-protection": "the PVC protection controller, once no pod uses the claim",
	"kubernetes.io/pv-protection":  "the PV protection controller, once the volume is released",
	// KubeVirt (kubevirt.io/api v1.9.0 core/v1/types.go:1237-1244).
	"kubevirt.io/virtualMachineControllerFinalize": "KubeVirt's VM controller, once the VMI is gone",
	"kubevirt.io/foregroundDeleteVirtualMachine":   "KubeVirt's VMI controller, once the launcher is gone",
	"foregroundDeleteVirtualMachine":               "KubeVirt's VMI controller, once the launcher is gone",
	"kubevirt.io/migrationJobFinalize":             "KubeVirt's migration controller",
	// Cluster API v1.13.6 (api/core/v1beta2: MachineFinalizer, ClusterFinalizer,
	// MachineDeploymentFinalizer, MachineSetFinalizer and the topology ones).
	"machine.cluster.x-k8s.io":                    "Cluster API's Machine controller, once the Node and infrastructure are gone",
	"cluster.cluster.x-k8s.io":                    "Cluster API's Cluster controller, once its descendants are gone",
	"cluster.x-k8s.io/machinedeployment":          "Cluster API's MachineDeployment controller",
	"cluster.x-k8s.io/machineset":                 "Cluster API's MachineSet controller",
	"machinedeployment.topology.cluster.x-k8s.io": "Cluster API's topology controller",
	"machineset.topology.cluster.x-k8s.io":        "Cluster API's topology controller",
	"machinepool.cluster.x-k8s.io":                "Cluster API's MachinePool controller",
	"kubeadm.controlplane.cluster.x-k8s.io":       "Cluster API's KubeadmControlPlane controller",
	// CAPK v0.1.10 (api/v1alpha1 kubevirtmachine_types.go:30, kubevirtcluster_types.go:28).
	"kubevirtmachine.infrastructure.cluster.x-k8s.io": "CAPK, once the VM is gone",
	"kubevirtcluster.infrastructure.cluster.x-k8s.io": "CAPK",
	// Flux (github.com/fluxcd/helm-controller/api v1.6.2 v2/helmrelease_types.go:37,
	// HelmReleaseFinalizer).
	"finalizers.fluxcd.io": "Flux, once the release is uninstalled",
	// Kamaji (clastix/kamaji 26.8.2-edge controllers/finalizers/tcp.go:8-10).
	"finalizer.kamaji.clastix.io":                  "Kamaji, once the tenant's datastore is cleaned",
	"finalizer.kamaji.clastix.io/datastore-secret": "Kamaji, once the datastore config is released",
	"finalizer.kamaji.clastix.io/soot":             "Kamaji, once the tenant's addons are gone",
}

// Foreign are obj's finalizers no controller of the platform removes (releasedBy).
func Foreign(finalizers []string) []string {
	var out []string
	for _, f := range finalizers {
		if _, ok := releasedBy[f]; !ok {
			out = append(out, f)
		}
	}
	return out
}

// Held reports whether obj is being deleted and only finalizers no controller of the platform
// removes are left on it: every controller that had a say has let go, and nothing will.
func Held(obj *unstructured.Unstructured) bool {
	if obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) == 0 {
		return false
	}
	return len(Foreign(obj.GetFinalizers())) == len(obj.GetFinalizers())
}

// Leftover names one object that should be gone: its kind and name, how long it has been
// deleting, and its finalizers with who removes each.
func Leftover(obj *unstructured.Unstructured, now time.Time) string {
	s := obj.GetKind() + " " + obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		s = obj.GetKind() + " " + ns + "/" + obj.GetName()
	}
	if dt := obj.GetDeletionTimestamp(); dt != nil {
		s += fmt.Sprintf(" (deleting for %s", now.Sub(dt.Time).Round(time.Second))
	} else {
		s += " (not deleted"
	}
	if obj.GetKind() == "Namespace" {
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		s += "; " + orDash(phase)
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m != nil && m["status"] == "True" && (m["type"] == "NamespaceContentRemaining" || m["type"] == "NamespaceFinalizersRemaining") {
				s += fmt.Sprintf("; %s: %v", m["type"], m["message"])
			}
		}
	}
	if fs := obj.GetFinalizers(); len(fs) > 0 {
		var parts []string
		for _, f := range fs {
			if by, ok := releasedBy[f]; ok {
				parts = append(parts, f+" ["+by+"]")
			} else {
				parts = append(parts, f+" [no controller of the platform removes it]")
			}
		}
		s += "; finalizers: " + strings.Join(parts, ", ")
	} else {
		s += "; no finalizers"
	}
	return s + ")"
}

// Leftovers names every object of objs, sorted.
func Leftovers(objs []*unstructured.Unstructured, now time.Time) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, Leftover(o, now))
	}
	sort.Strings(out)
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
