package tenant

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kinds without Go types in the harness, read and written as unstructured, at the API
// versions the platform renders them (docs/architecture.md, "Object graph").
var (
	TenantGVK                  = schema.GroupVersionKind{Group: "apps.cozystack.io", Version: "v1alpha1", Kind: "Tenant"}
	KubernetesGVK              = schema.GroupVersionKind{Group: "apps.cozystack.io", Version: "v1alpha1", Kind: "Kubernetes"}
	NodeGroupClassGVK          = schema.GroupVersionKind{Group: "cozystack.io", Version: "v1alpha1", Kind: "NodeGroupClass"}
	HelmReleaseGVK             = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}
	KamajiControlPlaneGVK      = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KamajiControlPlane"}
	TenantControlPlaneGVK      = schema.GroupVersionKind{Group: "kamaji.clastix.io", Version: "v1alpha1", Kind: "TenantControlPlane"}
	KubevirtClusterGVK         = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtCluster"}
	KubevirtMachineGVK         = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtMachine"}
	KubevirtMachineTemplateGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtMachineTemplate"}
)
