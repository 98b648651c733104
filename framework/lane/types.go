package lane

import (
	"fmt"
	"slices"
	"time"
)

// Substrate names where a lane's management cluster comes from.
type Substrate string

const (
	SubstrateKind     Substrate = "kind"
	SubstrateExisting Substrate = "existing"
	SubstrateSim      Substrate = "sim"
)

// Lane is one lane file: everything a run needs to know besides the code.
type Lane struct {
	// Name is the lane's name; it must match the file name (lanes/<name>.yaml).
	Name string `json:"name" lane:"required"`
	// Extends names the lane this one is written on top of (extends.go): a lane name, found
	// beside the file or in a lanes/ folder above it, or a path relative to the file.
	Extends     string    `json:"extends,omitempty"`
	Description string    `json:"description,omitempty"`
	Substrate   Substrate `json:"substrate" lane:"required"`
	// Kubernetes is the lane's tenant Kubernetes release: the release of every conformance
	// cluster that does not say its own (clusters[].kubernetes), and of the refusal cluster.
	Kubernetes Kubernetes `json:"kubernetes" lane:"required"`
	// ClusterSpecs are the conformance clusters the lane says something of (clusters[]): their
	// release, or the versions they are made at. A cluster the pools name without an entry
	// runs the lane's kubernetes. Once loaded, entries with versions are expanded (Cluster).
	ClusterSpecs []Cluster `json:"clusters,omitempty"`
	// Classes are operator NodeGroupClasses the lane creates before its pools.
	Classes []Class `json:"classes,omitempty"`
	// Pools are the tenant's worker pools, brought up in parallel. Once loaded, a pool of a
	// clusters[] entry with versions is one pool per version (Cluster.Versions).
	Pools []Pool `json:"pools" lane:"required"`
	// Workload is the pod run on every Node of every pool.
	Workload Workload `json:"workload" lane:"required"`
	// Components are the pinned versions and digests the lane installs.
	Components []Component `json:"components,omitempty"`
	// Suites are the Ginkgo suites the lane runs, in order.
	Suites []Suite `json:"suites" lane:"required"`
	Budget Budget  `json:"budget" lane:"required"`
	Policy Policy  `json:"policy"`
	// Runner is the machine footprint the lane needs (checked by preflight, used for the workflow).
	Runner Runner `json:"runner"`
	// Platform says where the Cozystack platform comes from (kind and existing substrates).
	Platform *Platform `json:"platform,omitempty"`
	// Kind configures the kind substrate.
	Kind *KindSettings `json:"kind,omitempty"`
	// Sim configures the sim substrate.
	Sim *SimSettings `json:"sim,omitempty"`

	// File is the path the lane was loaded from.
	File string `json:"-"`
	// Resolved is the lane as one document, its extends chain merged in and its suites' paths
	// resolved (nil for a lane that extends none and names no suite path): what a run copies
	// into its artifacts and a repro runs.
	Resolved []byte `json:"-"`
	// Deprecation, when set, is the line to print before anything else: the lane was asked for
	// by an old name (Aliases).
	Deprecation string `json:"-"`
	// lines maps field paths to their line in File; inherited maps the field paths written in
	// a lane it extends to that file and line.
	lines     map[string]int
	inherited map[string]string
}

// Kubernetes is the lane's tenant release.
type Kubernetes struct {
	// Version is the tenant app's version key, as in the platform's versions map ("v1.35"): one
	// the platform's Kubernetes chart offers at the pinned revision (Lane.TenantVersions).
	Version string `json:"version" lane:"required"`
	// Patch is the exact release the workers' kubelet must report ("v1.35.6").
	Patch string `json:"patch" lane:"required"`
}

// Class is an operator NodeGroupClass (the built-in talos and kairos need no entry).
type Class struct {
	Name string `json:"name" lane:"required"`
	// OS is the worker OS family: talos or kairos.
	OS string `json:"os" lane:"required"`
	// Image is the worker disk image (Kairos classes only), pinned by digest.
	Image string `json:"image,omitempty"`
	// KubernetesVersion is the release the image's kubelet and kubeadm are built at (required with Image).
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
}

// Pool is one worker pool of a conformance cluster.
type Pool struct {
	Name string `json:"name" lane:"required"`
	// Cluster names the conformance cluster (a Kubernetes app of the tenant) the pool is a
	// node group of; pools that name the same cluster share it. Empty: DefaultCluster.
	Cluster string `json:"cluster,omitempty"`
	// Class is the NodeGroupClass the pool names (talos, kairos or an operator class).
	Class    string `json:"class" lane:"required"`
	Replicas int    `json:"replicas" lane:"required"`
	// Labels are extra Ginkgo labels for this pool's spec.
	Labels []string `json:"labels,omitempty"`
	// Lifecycle names the lifecycle spec that acts on this pool once it joined (one of
	// LifecycleSpecs); a spec that no pool names picks a pool by its own rule.
	Lifecycle string `json:"lifecycle,omitempty"`
	// LogSerialConsole gives the pool's VMs KubeVirt's guest-console-log container, whose log
	// the harness then reads instead of the console subresource. Off by default, as in
	// Cozystack's chart: Cozystack disables the container cluster-wide, and it has been
	// reported holding virt-launcher in PodInitializing.
	LogSerialConsole bool `json:"logSerialConsole,omitempty"`

	// src is 1 + the index of the pools[] entry the pool was written as (an expanded pool
	// shares its entry's); 0 for a pool made in code, whose own index then stands.
	src int
}

// path is the field path of the pools[] entry pool i was written as.
func (p Pool) path(i int) string {
	if p.src > 0 {
		i = p.src - 1
	}
	return fmt.Sprintf("pools[%d]", i)
}

// DefaultCluster is the conformance cluster of a pool that names none; RefusalCluster is the
// kubernetes suite's own cluster of refused pools, which no lane pool may name.
const (
	DefaultCluster = "pools"
	RefusalCluster = "refusals"
)

// ClusterName is the conformance cluster the pool is in (DefaultCluster unless it names one).
func (p Pool) ClusterName() string {
	if p.Cluster == "" {
		return DefaultCluster
	}
	return p.Cluster
}

// Clusters are the lane's conformance clusters, in the order their first pool comes.
func (l *Lane) Clusters() []string {
	var out []string
	for _, p := range l.Pools {
		if c := p.ClusterName(); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// LifecycleSpecs are the specs a pool can be given to (Pool.Lifecycle).
var LifecycleSpecs = []string{"remediation", "scaling", "rollout"}

// Workload is the pod pinned to each Node.
type Workload struct {
	Image  string `json:"image" lane:"required"`
	Digest string `json:"digest" lane:"required"`
}

// Ref is the workload image reference, by digest.
func (w Workload) Ref() string { return w.Image + "@" + w.Digest }

// Component is one pinned piece the lane installs or builds.
type Component struct {
	Name    string `json:"name" lane:"required"`
	Version string `json:"version" lane:"required"`
	// Image is the container image, when the component ships as one.
	Image string `json:"image,omitempty"`
	// Digest is "sha256:<64 hex>", or "unknown" when the pin is not yet known (Note says why).
	Digest string `json:"digest,omitempty"`
	// Source is where the manifests or sources come from (URL, Go module, chart).
	Source string `json:"source,omitempty"`
	Note   string `json:"note,omitempty"`
}

// KindNodeComponent is the component that pins a kind lane's node image.
const KindNodeComponent = "kind-node"

// DigestUnknown marks a pin that is not known yet; it is never replaced by an invented value.
const DigestUnknown = "unknown"

// Suite is one Ginkgo suite under suites/.
type Suite struct {
	Name string `json:"name" lane:"required"`
	// Path is the suite's Go package folder: relative to the folder of the lane file that
	// names it, or absolute (Dir); empty: suites/<name> of the harness. A suite in a module of
	// its own (examples/nodelabels) is built there, against its own go.mod.
	Path string `json:"path,omitempty"`
	// LabelFilter is the Ginkgo label filter for this lane.
	LabelFilter string `json:"labelFilter,omitempty"`
	// dir is Path resolved (resolvePath), from the lane file that names the suite.
	dir, from string
}

// Budget is the lane's time budget: the job cap and every phase ceiling in it.
type Budget struct {
	// JobCap is the CI job's timeout-minutes; the harness must end before it.
	JobCap Duration `json:"jobCap" lane:"required"`
	// Margin is slack kept under the cap for the steps around the run (checkout, setup, upload).
	Margin Duration `json:"margin" lane:"required"`
	// DiagnosticsReserve is kept for the on-failure collectors.
	DiagnosticsReserve Duration `json:"diagnosticsReserve" lane:"required"`
	// ArtifactReserve is kept after the run for writing and uploading artifacts.
	ArtifactReserve Duration `json:"artifactReserve" lane:"required"`
	// Phases run in this order, those naming a cluster on its own timeline (timelines.go).
	Phases []Phase `json:"phases" lane:"required"`
	// Note says where the job cap and the reserves come from (each phase's own note says
	// where its ceiling does).
	Note string `json:"note,omitempty"`
}

// Phase is one step of the run with its ceiling.
type Phase struct {
	Name    string   `json:"name" lane:"required"`
	Ceiling Duration `json:"ceiling" lane:"required"`
	// Reserve is what earlier phases must leave for this one; it defaults to the ceiling.
	Reserve *Duration `json:"reserve,omitempty"`
	// Timeouts are named waits inside the phase, each at most the ceiling.
	Timeouts map[string]Duration `json:"timeouts,omitempty"`
	// Cluster puts the phase on that conformance cluster's own timeline (a clusters entry, a
	// pool's cluster, or the refusal cluster), beside the other clusters' (timelines.go);
	// "": a shared phase.
	Cluster string `json:"cluster,omitempty"`
	Note    string `json:"note,omitempty"`
}

// ReserveOrCeiling is what earlier phases must leave for this one.
func (p Phase) ReserveOrCeiling() time.Duration {
	if p.Reserve != nil {
		return p.Reserve.D()
	}
	return p.Ceiling.D()
}

// Policy decides which failure classes only warn on this lane.
type Policy struct {
	// Soft classes make a failing run exit 3 instead of 1 when every failure is soft.
	Soft []string `json:"soft,omitempty"`
	// Remediation says what a remediated HelmRelease (a failed or uninstalled release in its
	// status.history) does to the run.
	Remediation RemediationPolicy `json:"remediation"`
}

// Remediation policies.
const (
	// RemediationReport lists the remediations in the run's summary and gates.txt.
	RemediationReport = "report"
	// RemediationFail fails the run on one.
	RemediationFail = "fail"
)

// RemediationPolicy is what a remediation does, at install and on the tenant's release.
type RemediationPolicy struct {
	// Install covers every HelmRelease the platform install creates: report (the default;
	// Cozystack's own install gate requires only Ready) or fail.
	Install string `json:"install,omitempty"`
	// Tenant covers the tenant Kubernetes app's HelmRelease: fail (the default; Cozystack's e2e
	// fails on a remediation there) or report.
	Tenant string `json:"tenant,omitempty"`
}

// InstallPolicy is Install with its default.
func (r RemediationPolicy) InstallPolicy() string {
	if r.Install == "" {
		return RemediationReport
	}
	return r.Install
}

// TenantPolicy is Tenant with its default.
func (r RemediationPolicy) TenantPolicy() string {
	if r.Tenant == "" {
		return RemediationFail
	}
	return r.Tenant
}

// Runner is the machine the lane needs.
type Runner struct {
	// RunsOn is the GitHub Actions runner label set for the generated workflow.
	RunsOn []string `json:"runsOn,omitempty"`
	CPUs   int      `json:"cpus,omitempty"`
	// MemoryGiB and DiskGiB are the minimum the preflight accepts.
	MemoryGiB int `json:"memoryGiB,omitempty"`
	DiskGiB   int `json:"diskGiB,omitempty"`
	// InotifyWatches and InotifyInstances are the least fs.inotify.max_user_watches and
	// max_user_instances the preflight accepts (kind nodes run many kubelets' watchers);
	// zero means the kind substrate's defaults.
	InotifyWatches   int `json:"inotifyWatches,omitempty"`
	InotifyInstances int `json:"inotifyInstances,omitempty"`
	// Nightly keeps a kind lane out of the e2e workflow's pull request and push runs: it runs on
	// the nightly schedule and when dispatched (a lane whose job takes the runner for hours).
	Nightly bool `json:"nightly,omitempty"`
}

// Platform says which Cozystack to install.
type Platform struct {
	// Source is release:<version>@sha256:<hex>, manifest:<path or https URL>@sha256:<hex> or
	// checkout:<dir> (ParseSource); E2E_PLATFORM_SOURCE overrides it.
	Source string `json:"source" lane:"required"`
	// Variant is the platform bundle variant.
	Variant string `json:"variant,omitempty"`
	// Packages are extra platform packages to enable.
	Packages []string `json:"packages,omitempty"`
	// DisabledPackages are platform packages the lane leaves out (the variant would emit them),
	// each with why. A set that would leave a remaining Package without a dependency is
	// refused (internal/install/assumptions holds the dependency graph).
	DisabledPackages []DisabledPackage `json:"disabledPackages,omitempty"`
	// Note says what a reader of the plan must know about the source (an unreleased pin).
	Note string `json:"note,omitempty"`
	// Networking is the platform's own address ranges (the platform Package's networking
	// values); unset fields keep the platform's defaults (upstream.PlatformPodCIDR,
	// upstream.PlatformJoinCIDR). A kind lane's kind.networking ranges must be disjoint from them.
	Networking *PlatformNetworking `json:"networking,omitempty"`
}

// DisabledPackage is one platform Package a lane leaves out.
type DisabledPackage struct {
	Name string `json:"name" lane:"required"`
	// Reason says why the lane does without it.
	Reason string `json:"reason" lane:"required"`
}

// DisabledNames are the names of the disabled packages, in lane order.
func (p *Platform) DisabledNames() []string {
	out := make([]string, len(p.DisabledPackages))
	for i, d := range p.DisabledPackages {
		out[i] = d.Name
	}
	return out
}

// KindSettings configures the kind management cluster.
type KindSettings struct {
	// Workers is the number of worker nodes beside the control plane. The node image is the
	// component named "kind-node" (KindNodeComponent), pinned by digest.
	Workers int `json:"workers,omitempty"`
	// RegistryMirrors maps a registry host to mirror endpoints for containerd.
	RegistryMirrors map[string][]string `json:"registryMirrors,omitempty"`
	// Emulation allows KubeVirt software emulation; a lane of its own with its own budgets.
	Emulation bool `json:"emulation,omitempty"`
	// Networking is the kind cluster's networking (the platform brings its own CNI).
	Networking *KindNetworking `json:"networking,omitempty"`
	// PortMappings publish node ports on the runner.
	PortMappings []KindPortMapping `json:"portMappings,omitempty"`
	// LoadBalancerRange is the MetalLB address range ("172.18.255.200-172.18.255.250"); empty
	// means the top of the kind docker network's IPv4 subnet, found at run time.
	LoadBalancerRange string `json:"loadBalancerRange,omitempty"`
}

// KindNetworking is the kind cluster's networking section.
type KindNetworking struct {
	// DisableDefaultCNI leaves kindnet out; the platform installs its own CNI.
	DisableDefaultCNI bool `json:"disableDefaultCNI,omitempty"`
	// KubeProxyMode is iptables, nftables or none (the platform's CNI replaces kube-proxy).
	KubeProxyMode string `json:"kubeProxyMode,omitempty"`
	PodSubnet     string `json:"podSubnet,omitempty"`
	ServiceSubnet string `json:"serviceSubnet,omitempty"`
	// DNSDomain is the cluster domain (kubeadm's networking.dnsDomain, the kubelets'
	// clusterDomain), also given to the platform as networking.clusterDomain; empty means the
	// platform's default, cozy.local, which its generic install guide requires.
	DNSDomain string `json:"dnsDomain,omitempty"`
}

// KindPortMapping publishes a node container port on the runner.
type KindPortMapping struct {
	ContainerPort int    `json:"containerPort" lane:"required"`
	HostPort      int    `json:"hostPort" lane:"required"`
	ListenAddress string `json:"listenAddress,omitempty"`
	// Protocol is TCP (default), UDP or SCTP.
	Protocol string `json:"protocol,omitempty"`
}

// SimSettings configures the sim substrate's stand-ins.
type SimSettings struct {
	// Latencies of the stand-ins (disk import, boot, join); short by default.
	Latencies map[string]Duration `json:"latencies,omitempty"`
	// MachineHealthCheck overrides the Kubernetes chart's nodeHealthCheck values for every app
	// the sim's model of cozystack/cozystack#4911 renders (the chart's own when unset:
	// maxUnhealthy 50%, nodeStartupTimeout 10m); an app the real chart renders (its pools all
	// run Talos) keeps the chart's values, which a spec may override per node group.
	MachineHealthCheck *SimMachineHealthCheck `json:"machineHealthCheck,omitempty"`
	// RealNode asks for the sim's real Node (internal/sim/node): a real kubelet with containerd
	// and runc on this host beside the kwok Nodes. Its preflight names every Debian package and
	// binary it lacks; the default sim lane needs none of them.
	RealNode bool `json:"realNode,omitempty"`
}

// SimMachineHealthCheck are the chart's nodeHealthCheck values, as an app sets them.
type SimMachineHealthCheck struct {
	// MaxUnhealthy is a bare integer or an integer percentage ("100%").
	MaxUnhealthy string `json:"maxUnhealthy,omitempty"`
	// NodeStartupTimeout is how long a Machine may take to get its Node before it is remediated
	// (Cluster API refuses less than 30s).
	NodeStartupTimeout Duration `json:"nodeStartupTimeout,omitempty"`
}
