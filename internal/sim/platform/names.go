package platform

import "k8s.io/apimachinery/pkg/runtime/schema"

// The platform's names, as the charts derive them.
const (
	RootNamespace   = "tenant-root"
	NamespacePrefix = "tenant-"
	ReleasePrefix   = "kubernetes-"
	// CanarySecret is the Secret planted in every tenant namespace; its key is CanaryKey.
	CanarySecret = "sim-canary"
	CanaryKey    = "value"
	// TenantAdminClusterRole is bound in a tenant namespace to the tenant's admin group.
	TenantAdminClusterRole = "cozy:tenant:admin"
	// ClassTalos and ClassKairos are the built-in NodeGroupClasses.
	ClassTalos  = "talos"
	ClassKairos = "kairos"
	// ServiceCIDR and PodCIDR are what the chart renders on every Cluster.
	ServiceCIDR = "10.95.0.0/16"
	PodCIDR     = "10.243.0.0/16"
)

// Labels cozystack-api puts on an app's HelmRelease (cozystack/cozystack
// pkg/apis/apps/v1alpha1/types.go:26-28).
const (
	AppKindLabel = "apps.cozystack.io/application.kind"
	AppNameLabel = "apps.cozystack.io/application.name"
)

// TenantAdminGroup is the group whose members administer tenant t, a child of tenant-root (the
// harness impersonates it): <tenant.name>-admin, tenant.name being tenant-<t> (Cozystack v1.6.1
// packages/apps/tenant/templates/_helpers.tpl:1-14, tenant.yaml:62-74 and
// packages/library/cozy-lib/templates/_rbac.tpl:84-96).
func TenantAdminGroup(tenant string) string { return "tenant-" + tenant + "-admin" }

// TenantAdminBinding is the RoleBinding of TenantAdminClusterRole in a tenant namespace
// (Cozystack v1.6.1 packages/apps/tenant/templates/tenant.yaml:64-67).
const TenantAdminBinding = "cozy:tenant:admin"

// Release is the HelmRelease, Cluster and control plane name of Kubernetes app name.
func Release(name string) string { return ReleasePrefix + name }

var (
	TenantGVK                  = schema.GroupVersionKind{Group: "apps.cozystack.io", Version: "v1alpha1", Kind: "Tenant"}
	KubernetesGVK              = schema.GroupVersionKind{Group: "apps.cozystack.io", Version: "v1alpha1", Kind: "Kubernetes"}
	NodeGroupClassGVK          = schema.GroupVersionKind{Group: "cozystack.io", Version: "v1alpha1", Kind: "NodeGroupClass"}
	HelmReleaseGVK             = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}
	ClusterGVK                 = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "Cluster"}
	MachineDeploymentGVK       = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "MachineDeployment"}
	MachineHealthCheckGVK      = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "MachineHealthCheck"}
	KamajiControlPlaneGVK      = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KamajiControlPlane"}
	KubevirtClusterGVK         = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtCluster"}
	KubevirtMachineTemplateGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtMachineTemplate"}
	TalosConfigTemplateGVK     = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha3", Kind: "TalosConfigTemplate"}
	KairosConfigTemplateGVK    = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KairosConfigTemplate"}
)
