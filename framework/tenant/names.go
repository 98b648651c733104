// Package tenant is the platform API the suites drive: the Tenant and Kubernetes apps, their
// worker pools on NodeGroupClasses, and the one place where every object name is derived from
// (namespace, cluster, pool). Suites and collectors never spell a name themselves.
package tenant

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
)

// Names and keys the platform, Kamaji, Cluster API and CAPK agree on.
const (
	// RootNamespace holds the root tenant's apps, among them every Tenant app.
	RootNamespace = "tenant-root"
	// NamespacePrefix: a Tenant app <t> gets the namespace tenant-<t>.
	NamespacePrefix = "tenant-"
	// ReleasePrefix: a Kubernetes app <name> is released as kubernetes-<name> (HelmRelease, Cluster, control plane).
	ReleasePrefix = "kubernetes-"
	// AdminKubeconfigKey is the key of the admin kubeconfig Secret the harness reads.
	AdminKubeconfigKey = "super-admin.conf"
	// KubeconfigKey is the key of the Cluster API kubeconfig Secret (<R>-kubeconfig).
	KubeconfigKey = "value"
	// DiskSuffix: CAPK names a VM's system disk DataVolume <vm>-disk-system.
	DiskSuffix = "-disk-system"
	// ImporterPrefix: CDI's importer Pod for DataVolume <dv> is importer-<dv>.
	ImporterPrefix = "importer-"
	// LauncherPrefix: KubeVirt names a VMI's launcher Pod by generateName virt-launcher-<vmi>-
	// (kubevirt/kubevirt v1.8.4 pkg/virt-controller/services/template.go:638); the apiserver
	// cuts a generateName base to 58 characters, so for a VMI name over 43 characters the Pod's
	// name no longer holds it whole. Link a launcher to its VMI by LabelCreatedBy, never by name.
	LauncherPrefix = "virt-launcher-"
	// LabelCreatedBy is KubeVirt's label on a launcher Pod holding its VMI's UID
	// (template.go:1614, kubevirt.io/api core/v1 CreatedByLabel).
	LabelCreatedBy = "kubevirt.io/created-by"
	// AnnotationEphemeralProvisioning marks the temporary launcher KubeVirt starts while a
	// DataVolume waits for its first consumer (pkg/virt-controller/watch/vmi lifecycle.go:151-153,
	// template.go:545-548): it runs no guest and is deleted once the volume binds.
	AnnotationEphemeralProvisioning = "kubevirt.io/ephemeral-provisioning"
	// ProviderIDPrefix: a KubeVirt-backed Node's providerID is kubevirt://<vmi>.
	ProviderIDPrefix = "kubevirt://"

	// LabelClusterName and LabelDeploymentName select a pool's Machines, VMs and VMIs.
	LabelClusterName    = "cluster.x-k8s.io/cluster-name"
	LabelDeploymentName = "cluster.x-k8s.io/deployment-name"

	// Annotations Cluster API writes on a tenant Node once it links its Machine.
	AnnotationClusterName      = "cluster.x-k8s.io/cluster-name"
	AnnotationClusterNamespace = "cluster.x-k8s.io/cluster-namespace"
	AnnotationMachine          = "cluster.x-k8s.io/machine"

	// KubeletConfigNamespace/Name is Kamaji's kubelet configuration in the tenant cluster.
	KubeletConfigNamespace = "kube-system"
	KubeletConfigName      = "kubelet-config"
	// KubeletConfigKey is the ConfigMap key holding the KubeletConfiguration.
	KubeletConfigKey = "kubelet"

	// CoreDNSNamespace/Service is the tenant's cluster DNS Service (its ClusterIP is clusterDNS).
	CoreDNSNamespace = "kube-system"
	CoreDNSService   = "kube-dns"

	// WorkloadNamespace is the tenant namespace of the harness's workload pods.
	WorkloadNamespace = "cozy-e2e-workload"

	// ClassTalos and ClassKairos are the built-in NodeGroupClasses, named after their family.
	ClassTalos  = osfamily.Talos
	ClassKairos = osfamily.Kairos

	// maxLabelValue bounds every name that also travels as a label value (VM, VMI, Machine).
	maxLabelValue = 63
)

// SecretKey names one key of one Secret.
type SecretKey struct {
	Namespace, Name, Key string
}

func (s SecretKey) String() string { return s.Namespace + "/" + s.Name + "[" + s.Key + "]" }

var runIDPattern = regexp.MustCompile(`^[a-z0-9]{1,10}$`)

// Run derives the names of one run's tenant from its id (E2E_RUN_ID), so two runs against
// the same management cluster never share an object.
type Run struct{ ID string }

// NewRun checks id: 1 to 10 lowercase letters or digits (it ends up in namespace, label and
// DNS names). Upper case is folded; anything else is refused.
func NewRun(id string) (Run, error) {
	id = strings.ToLower(strings.TrimSpace(id))
	if !runIDPattern.MatchString(id) {
		return Run{}, fmt.Errorf("E2E_RUN_ID %q: a run id is 1 to 10 lowercase letters or digits (it becomes part of namespace and VM names)", id)
	}
	return Run{ID: id}, nil
}

// TenantName is the Tenant app's name (in RootNamespace). Tenant names carry no dash.
func (r Run) TenantName() string { return "e2e" + r.ID }

// Namespace is the tenant namespace the Tenant app creates.
func (r Run) Namespace() string { return NamespacePrefix + r.TenantName() }

// Cluster names a Kubernetes app of this run; role says what it is for ("pools", "refusals").
func (r Run) Cluster(role string) Names {
	return Names{Namespace: r.Namespace(), Name: role + "-" + r.ID}
}

// Names are the names of one Kubernetes app (cluster) and the objects it renders.
type Names struct {
	// Namespace is the tenant namespace (tenant-<t>).
	Namespace string
	// Name is the Kubernetes app's name.
	Name string
}

// For is the Names of app name in namespace.
func For(namespace, name string) Names { return Names{Namespace: namespace, Name: name} }

// Release is R = kubernetes-<name>: the HelmRelease, Cluster, KamajiControlPlane,
// TenantControlPlane and KubevirtCluster share it.
func (n Names) Release() string { return ReleasePrefix + n.Name }

// HelmRelease is the Flux HelmRelease the platform renders the app through.
func (n Names) HelmRelease() string { return n.Release() }

// Cluster is the Cluster API Cluster.
func (n Names) Cluster() string { return n.Release() }

// ControlPlane is the KamajiControlPlane (and Kamaji's TenantControlPlane).
func (n Names) ControlPlane() string { return n.Release() }

// AdminKubeconfig is Kamaji's admin kubeconfig Secret and the key the harness reads.
func (n Names) AdminKubeconfig() SecretKey {
	return SecretKey{Namespace: n.Namespace, Name: n.Release() + "-admin-kubeconfig", Key: AdminKubeconfigKey}
}

// AwaitingEtcd is the ConfigMap the Kubernetes chart renders instead of the cluster when the
// tenant's namespace has no etcd DataStore (packages/apps/kubernetes/templates/cluster.yaml:226-244).
func (n Names) AwaitingEtcd() string { return n.Release() + "-awaiting-etcd" }

// Kubeconfig is the Cluster API kubeconfig Secret (what the Machine controller uses).
func (n Names) Kubeconfig() SecretKey {
	return SecretKey{Namespace: n.Namespace, Name: n.Release() + "-kubeconfig", Key: KubeconfigKey}
}

// Pool is the names of pool p of this cluster.
func (n Names) Pool(p string) PoolNames { return PoolNames{Names: n, Pool: p} }

func (n Names) String() string { return n.Namespace + "/" + n.Name }

// PoolNames are the names of one worker pool (nodeGroups.<pool>) and its objects.
type PoolNames struct {
	Names
	Pool string
}

// MachineDeployment is R-<pool>.
func (p PoolNames) MachineDeployment() string { return p.Release() + "-" + p.Pool }

// MachineHealthCheck is R-<pool>.
func (p PoolNames) MachineHealthCheck() string { return p.Release() + "-" + p.Pool }

// BootstrapTemplate is the TalosConfigTemplate or KairosConfigTemplate, R-<pool>.
func (p PoolNames) BootstrapTemplate() string { return p.Release() + "-" + p.Pool }

// MachineTemplatePrefix starts the content-hashed KubevirtMachineTemplate name R-<pool>-<sha6>.
func (p PoolNames) MachineTemplatePrefix() string { return p.Release() + "-" + p.Pool + "-" }

// IsMachineTemplate reports whether name is one of this pool's KubevirtMachineTemplates
// (R-<pool>-<6 hex>), not another pool's whose name merely starts alike.
func (p PoolNames) IsMachineTemplate(name string) bool {
	rest, ok := strings.CutPrefix(name, p.MachineTemplatePrefix())
	return ok && len(rest) == 6 && strings.Trim(rest, "0123456789abcdef") == ""
}

// Selector selects the pool's MachineSets, Machines, VMs and VMIs.
func (p PoolNames) Selector() client.MatchingLabels {
	return client.MatchingLabels{LabelClusterName: p.Release(), LabelDeploymentName: p.MachineDeployment()}
}

func (p PoolNames) String() string { return p.Names.String() + " pool " + p.Pool }

// DataVolume is the system disk DataVolume (and PVC) of VM vm.
func DataVolume(vm string) string { return vm + DiskSuffix }

// ImporterPod is CDI's importer Pod of DataVolume dv.
func ImporterPod(dv string) string { return ImporterPrefix + dv }

// WorkloadPod is the harness's workload pod pinned to tenant Node node.
func WorkloadPod(node string) string { return "workload-" + node }

// ProviderID is the providerID of the Node backed by VMI vmi.
func ProviderID(vmi string) string { return ProviderIDPrefix + vmi }

// VMIFromProviderID is the VMI a providerID names, or false when it is not a KubeVirt one.
func VMIFromProviderID(id string) (string, bool) {
	vmi, ok := strings.CutPrefix(id, ProviderIDPrefix)
	return vmi, ok && vmi != ""
}

// LauncherVMIUID is the UID of the VMI a launcher Pod runs (its LabelCreatedBy), "" when the
// Pod is not a launcher.
func LauncherVMIUID(labels map[string]string) string { return labels[LabelCreatedBy] }

// machineSuffix is what Cluster API v1.13 appends to the MachineDeployment name for a Machine:
// the MachineSet is <md>-<5 random> (internal/controllers/machinedeployment/
// machinedeployment_sync.go:92-108) and the Machine <machineset>-<5 random>
// (internal/controllers/machineset/machineset_controller.go:1122), each cut to 58 characters
// plus 5 random ones past 63 (internal/topology/names/names.go:126-151).
const machineSuffix = 12

// CheckPoolNames refuses pool names whose derived object names would not fit: a Machine, VM
// and VMI name is R-<pool>-<5>-<5> and travels as a label value (63 characters at most); past
// that Cluster API cuts it, and it no longer names its pool.
func (n Names) CheckPoolNames(pools ...string) error {
	var bad []string
	for _, p := range pools {
		if p == "" || strings.ToLower(p) != p || strings.ContainsAny(p, "._ ") {
			bad = append(bad, fmt.Sprintf("%q is not a DNS label", p))
			continue
		}
		vm := len(n.Pool(p).MachineDeployment()) + machineSuffix
		if vm > maxLabelValue {
			bad = append(bad, fmt.Sprintf("pool %q: its VM names reach %d characters (at most %d); shorten the pool or cluster name by %d",
				p, vm, maxLabelValue, vm-maxLabelValue))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("cluster %s: %s", n, strings.Join(bad, "; "))
	}
	return nil
}
