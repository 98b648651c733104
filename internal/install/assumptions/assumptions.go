// Package assumptions is what the real lane assumes of the platform and of kind, each fact with
// where upstream says it: the values the harness relies on as constants, the Package
// dependency graph at the revisions read, and the Packages the suites need. docs/upstream.md
// lists every one with its repository, revision, path and line; a test fails when an
// assumption here is missing there.
package assumptions

import "strings"

// Revisions read.
const (
	// CozystackMain is cozystack/cozystack main as read for issue 9.
	CozystackMain = "3c780acd417f086f8f18d040d0d7020ff55d3ba3"
	// CozystackRelease is tag v1.6.2.
	CozystackRelease = "bfde94fd26d35c5f0281a1285f194e7ca3041b6a"
)

// Node and cluster settings the platform expects of a generic (not Talos) cluster.
const (
	// ControlPlaneLabel is the label kube-ovn's ovn-central, kube-ovn-monitor and ic-controller
	// select, with ControlPlaneLabelValue, on the generic variant (MASTER_NODES_LABEL).
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"
	// ControlPlaneLabelValue is the value they require; kubeadm (so kind) sets "".
	ControlPlaneLabelValue = "true"
	// ClusterDomain is the platform's networking.clusterDomain default, which the generic
	// install guide requires of the cluster.
	ClusterDomain = "cozy.local"
	// PlatformPodCIDR and PlatformJoinCIDR are the platform's networking.podCIDR (kube-ovn's
	// POD_CIDR, from which it hands pods their addresses) and networking.joinCIDR defaults
	// (packages/core/platform/values.yaml:63, 66 at main and v1.6.2; templates/bundles/system.yaml:8,11).
	// The kind cluster's own pod range (Node.spec.podCIDR, where Cilium takes its router and
	// ingress addresses) must be disjoint from both: Cozystack's e2e moved its cluster range to
	// 100.65.0.0/16 for that (commit 9ace63b44, hack/e2e-prepare-cluster.bats:197-208 at main)
	// and guards it (hack/sandbox-cidr-disjoint.bats).
	PlatformPodCIDR  = "10.244.0.0/16"
	PlatformJoinCIDR = "100.64.0.0/16"
	// InotifyWatches and InotifyInstances are the generic install guide's sysctls.
	InotifyWatches   = 524288
	InotifyInstances = 8192
	// InotifyQueuedEvents is the guide's fs.inotify.max_queued_events.
	InotifyQueuedEvents = 65536
)

// The platform's own objects the gates read.
const (
	// PlatformVariant is the system bundle variant that renders the iaas bundle on a cluster
	// that is not Talos.
	PlatformVariant = "isp-full-generic"
	// PlatformPackage is the Package that installs the platform chart.
	PlatformPackage = "cozystack.cozystack-platform"
	// OperatorAsset is the release asset that installs the operator on a generic cluster.
	OperatorAsset = "cozystack-operator-generic.yaml"
	// OperatorAPIServerPlaceholder is what the generic asset carries for the apiserver host.
	OperatorAPIServerPlaceholder = "REPLACE_ME"
	// DependenciesNotReady is the reason of Ready=False on a Package whose dependency is
	// missing or not Ready; such a Package gets no HelmRelease.
	DependenciesNotReady = "DependenciesNotReady"
	// FluxNamespace and FluxDeployment: the operator installs Flux as one Deployment, its
	// controllers containers of one pod.
	FluxNamespace  = "cozy-fluxcd"
	FluxDeployment = "flux"
	// RootTenantNamespace holds the root Tenant app RootTenant and its HelmReleases.
	RootTenantNamespace = "tenant-root"
	RootTenant          = "root"
	// RootEtcdRelease is the HelmRelease of the root tenant's etcd (spec.etcd: true).
	RootEtcdRelease = "etcd"
	// RootDataStore is the Kamaji DataStore the root tenant's etcd chart creates, named after
	// its namespace; tenant clusters under tenant-root name it as their dataStoreName.
	RootDataStore = "tenant-root"
	// AwaitingEtcdSuffix: without an etcd in the tenant's ancestry the Kubernetes chart renders
	// only the ConfigMap <release>-awaiting-etcd and its HelmRelease still reports Ready.
	AwaitingEtcdSuffix = "-awaiting-etcd"
)

// Building the platform from a checkout (cozystack/cozystack's own make targets).
const (
	// ManifestsTarget writes _out/assets/cozystack-operator-generic.yaml (the root Makefile);
	// `make assets` does not.
	ManifestsTarget = "manifests"
	// InstallerDir holds the installer chart and the targets that build the operator image and
	// push the packages artifact, rewriting values.yaml to point at them.
	InstallerDir         = "packages/core/installer"
	ImageOperatorTarget  = "image-operator"
	ImagePackagesTarget  = "image-packages"
	OperatorImageName    = "cozystack-operator"
	PackagesArtifactName = "cozystack-packages"
)

// Assumption is one fact the real lane relies on.
type Assumption struct {
	// Name is the constant or datum, Value what the harness takes it to be.
	Name, Value string
	// Source is where upstream says it, path:line (in cozystack/cozystack at CozystackMain
	// unless docs/upstream.md says otherwise; generic.md is the website's install guide).
	Source string
}

// Assumptions are the facts above with their sources; docs/upstream.md must name each Value
// and Source.
func Assumptions() []Assumption {
	return []Assumption{
		{"ControlPlaneLabel", ControlPlaneLabel + "=" + ControlPlaneLabelValue, "packages/core/platform/templates/bundles/system.yaml:107-108"},
		{"ClusterDomain", ClusterDomain, "packages/core/platform/values.yaml:62"},
		{"InotifyInstances", "max_user_instances = 8192", "generic.md:79-81"},
		{"PlatformPodCIDR", "podCIDR: \"" + PlatformPodCIDR + "\"", "packages/core/platform/values.yaml:63"},
		{"PlatformJoinCIDR", "joinCIDR: \"" + PlatformJoinCIDR + "\"", "packages/core/platform/values.yaml:66"},
		{"SandboxClusterCIDR", "100.65.0.0/16", "hack/sandbox-cidr-disjoint.bats"},
		{"PlatformVariant", PlatformVariant, "cmd/cozystack-operator/main.go:685"},
		{"PlatformPackage", PlatformPackage, "cmd/cozystack-operator/main.go:693-700"},
		{"OperatorAsset", OperatorAsset, "hack/upload-assets.sh:6-17"},
		{"OperatorAPIServerPlaceholder", OperatorAPIServerPlaceholder, "packages/core/installer/templates/cozystack-operator.yaml:213-219"},
		{"DependenciesNotReady", DependenciesNotReady, "internal/operator/package_reconciler.go:187-202"},
		{"FluxDeployment", FluxNamespace + "/" + FluxDeployment, "internal/fluxinstall/manifests/fluxcd.yaml:7883-7893"},
		{"RootTenant", RootTenantNamespace + "/" + RootTenant, "hack/e2e-install-cozystack.bats:315"},
		{"RootEtcdRelease", RootTenantNamespace + "/" + RootEtcdRelease, "hack/e2e-install-cozystack.bats:328-329"},
		{"RootDataStore", RootDataStore, "packages/extra/etcd/templates/datastore.yaml:1-9"},
		{"AwaitingEtcdSuffix", AwaitingEtcdSuffix, "packages/apps/kubernetes/templates/cluster.yaml:226-244"},
		{"ManifestsTarget", "make " + ManifestsTarget, "Makefile:43-77"},
		{"ImageOperatorTarget", ImageOperatorTarget, "packages/core/installer/Makefile:23-32"},
		{"ImagePackagesTarget", ImagePackagesTarget, "packages/core/installer/Makefile:34-48"},
		{"KindTenantVersions", strings.Join(KindTenantVersions().Keys(), ", "), KindTenantVersions().Schema},
		{"TenantReleases", tenantReleases(KindTenantVersions()), KindTenantVersions().Patches},
	}
}
