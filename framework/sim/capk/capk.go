// Package capk stands in for the Cluster API KubeVirt infrastructure provider (CAPK v0.1.10,
// infrastructure.cluster.x-k8s.io/v1alpha1, the v1beta1 contract). KubevirtCluster: ready, unless
// it is externally managed (the platform's carries cluster.x-k8s.io/managed-by: kamaji, and then,
// as with the real CAPK, the control plane provider reports it ready). KubevirtMachine: the
// userdata Secret <dataSecretName>-userdata, a VirtualMachine of the same name built from
// spec.virtualMachineTemplate as CAPK builds it (labels, DataVolume templates prefixed with the VM
// name, the cloud-init ConfigDrive volume), spec.providerID kubevirt://<name>, addresses and ready
// once the VMI is Ready, and the providerID patched onto the tenant Node of the same name through
// the <cluster>-kubeconfig Secret (CAPK's updateNodeProviderID). Deleting a KubevirtMachine deletes
// its VM.
package capk

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/sim/names"
	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
	"github.com/cozystack/cozy-e2e/framework/sim/standin"
)

// Names CAPK uses.
const (
	MachineFinalizer      = "kubevirtmachine.infrastructure.cluster.x-k8s.io"
	ClusterFinalizer      = "kubevirtcluster.infrastructure.cluster.x-k8s.io"
	LabelMachineName      = "capk.cluster.x-k8s.io/kubevirt-machine-name"
	LabelMachineNamespace = "capk.cluster.x-k8s.io/kubevirt-machine-namespace"
	AnnotationManagedBy   = "cluster.x-k8s.io/managed-by"

	VMProvisioned       = "VMProvisioned"
	VMLiveMigratable    = "VMLiveMigratable"
	WaitingForInfra     = "WaitingForClusterInfrastructure"
	WaitingForCP        = "WaitingForControlPlaneAvailable"
	WaitingForBootstrap = "WaitingForBootstrapData"
)

// Setup registers the KubevirtCluster and KubevirtMachine reconcilers on mgr.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	if err := setupCluster(mgr, env); err != nil {
		return err
	}
	return setupMachine(mgr, env, &standin.Tenants{})
}

func newObj(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	switch kind {
	case names.KubevirtClusterGVK.Kind:
		u.SetGroupVersionKind(names.KubevirtClusterGVK)
	default:
		u.SetGroupVersionKind(names.KubevirtMachineGVK)
	}
	return u
}
