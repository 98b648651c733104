// Package names holds the upstream names, keys and kinds the sim's stand-ins imitate, each read
// from the upstream source that defines it. The stand-ins take them from here, never from the
// harness's own packages: the sim imitates upstream, not the checks that judge it. A contract
// test (framework/tenant/contract_test.go) keeps this copy and the harness's in step, and both
// in step with the sim's render of a pool and the pinned chart's templates.
package names

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kinds the stand-ins read and write without Go types.
var (
	// kubernetes-sigs/cluster-api-provider-kubevirt v0.1.10 api/v1alpha1.
	KubevirtClusterGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtCluster"}
	KubevirtMachineGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtMachine"}
	// siderolabs/cluster-api-bootstrap-provider-talos v0.6.12 api/v1alpha3.
	TalosConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha3", Kind: "TalosConfig"}
	// kairos-io/cluster-api-provider-kairos api/bootstrap/v1beta2.
	KairosConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KairosConfig"}
)

const (
	// OSTalos and OSKairos are the NodeGroupClass spec.os values (cozystack/cozystack#4911, the seed).
	OSTalos  = "talos"
	OSKairos = "kairos"

	// KubeconfigKey is the key of Cluster API's <cluster>-kubeconfig Secret
	// (clastix/cluster-api-control-plane-provider-kamaji v0.19.0
	// controllers/kamajicontrolplane_controller_resources.go:158-175).
	KubeconfigKey = "value"

	// KubeletConfigNamespace/Name/Key: Kamaji's kubelet configuration in the tenant
	// (clastix/kamaji internal/kubeadm/uploadconfig.go:33-72 (UploadKubeletConfig)).
	KubeletConfigNamespace = "kube-system"
	KubeletConfigName      = "kubelet-config"
	KubeletConfigKey       = "kubelet"

	// CoreDNSNamespace/Service: the tenant's cluster DNS Service (kubeadm's CoreDNS addon).
	CoreDNSNamespace = "kube-system"
	CoreDNSService   = "kube-dns"

	// LabelCreatedBy is KubeVirt's label on a launcher Pod holding its VMI's UID
	// (kubevirt/kubevirt v1.8.4 pkg/virt-controller/services/template.go:1614).
	LabelCreatedBy = "kubevirt.io/created-by"

	// ImporterPrefix: CDI's importer Pod of claim <pvc> is importer-<pvc>
	// (kubevirt/containerized-data-importer v1.64.0 pkg/controller/import-controller.go:872-873).
	ImporterPrefix = "importer-"

	// ProviderIDPrefix: CAPK's providerID is kubevirt://<KubevirtMachine name>
	// (cluster-api-provider-kubevirt v0.1.10 pkg/kubevirt/machine.go:390).
	ProviderIDPrefix = "kubevirt://"

	// DiskSuffix: CAPK prefixes each dataVolumeTemplate's name with <vm>-
	// (pkg/kubevirt/utils.go:39-68) and the Cozystack chart names the system disk disk-system
	// (packages/apps/kubernetes/templates/cluster.yaml:91-93).
	DiskSuffix = "-disk-system"
)

// ProviderID is CAPK's providerID of KubevirtMachine name.
func ProviderID(name string) string { return ProviderIDPrefix + name }

// DataVolume is the system disk DataVolume of VM vm.
func DataVolume(vm string) string { return vm + DiskSuffix }

// ImporterPod is CDI's importer Pod of claim pvc.
func ImporterPod(pvc string) string { return ImporterPrefix + pvc }
