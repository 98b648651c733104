package assumptions

// What the real lane sets on its kind node, each value with where upstream says it. Revisions:
// cozystack/cozystack at CozystackMain and v1.6.1 (8f4c19daaeb0), v1.6.2; kind at v0.31.0 and the
// module sigs.k8s.io/kind@v0.33.0; containerd v2.2.0 (the module); Kubernetes v1.35.4.
const (
	// KubeletMaxPods is the kubelet's maxPods on the kind node: what Cozystack's own e2e gives
	// its nodes (hack/e2e-prepare-cluster.bats:132 at main, l.126 at v1.6.1 and v1.6.2) and its
	// Talos presets (the website's talosctl.md:71); its generic guide asks 220 of a k3s node
	// (generic.md:134). The kind lane runs the whole platform and every worker's launcher on one
	// node, which Cozystack's e2e spreads over three nodes of 512.
	KubeletMaxPods = 512
	// KubeletDefaultMaxPods is the kubelet's own default (k8s.io/kubernetes v1.35.4
	// pkg/kubelet/apis/config/v1beta1/defaults.go:194-195).
	KubeletDefaultMaxPods = 110
	// GenericGuideMaxPods is the generic install guide's max-pods for a k3s node.
	GenericGuideMaxPods = 220
	// CRIPluginV2 is the CRI plugin's table in a containerd config of version 2, the version
	// kind's node images ship (kind v0.31.0 and v0.33.0 images/base/files/etc/containerd/config.toml:2,
	// l.35). containerd 2.x (v2.2.0 in kind v0.31.0's base image, images/base/Dockerfile:125)
	// migrates a version 2 config's CRI keys into io.containerd.cri.v1.runtime
	// (plugins/cri/runtime/plugin.go:197-247 at v2.2.0), where Cozystack's Talos nodes, on a
	// version 3 config, set them directly (hack/e2e-prepare-cluster.bats:170-171 at main).
	CRIPluginV2 = `plugins."io.containerd.grpc.v1.cri"`
	// DeviceOwnershipKey makes containerd give a container's devices the uid and gid of its
	// securityContext rather than the host's (internal/cri/config/config.go:389-391,
	// internal/cri/opts/spec_linux_opts.go:289-320 at v2.2.0), so a non-root virt-launcher can
	// open /dev/kvm when the host's is not world-writable; Cozystack's e2e sets it true
	// (hack/e2e-prepare-cluster.bats:170-171 at main, l.164-165 at v1.6.1 and v1.6.2).
	DeviceOwnershipKey = "device_ownership_from_security_context"
)

// MetalLB on the kind node: who announces a LoadBalancer address.
const (
	// ExcludeFromExternalLBLabel is the label kubeadm puts on every control-plane node
	// (k8s.io/kubernetes v1.35.4 cmd/kubeadm/app/phases/markcontrolplane/markcontrolplane.go:31-34,
	// 54-56; constants/constants.go:278). MetalLB's speaker announces nothing from a node that
	// carries it (MetalLB v0.16.1 speaker/layer2_controller.go:268-271,
	// internal/k8s/nodes/nodes.go:29-38 (IsNodeExcludedFromBalancers)) unless started with
	// --ignore-exclude-lb (speaker/main.go:99 (ignoreLBExclude)), which the chart renders from
	// speaker.ignoreExcludeLB, false in the chart Cozystack v1.6.1 vendors
	// (packages/system/metallb/charts/metallb/values.yaml:270 (ignoreExcludeLB),
	// templates/speaker.yaml:279-281 (ignoreExcludeLB); the same at v1.6.2 and main). Cozystack's
	// own e2e deletes the label from its control-plane nodes
	// (hack/e2e-prepare-cluster.bats:216-218 at main, l.200-202 at v1.6.2). kind v0.33.0 removes
	// it itself only from a cluster of one node
	// (pkg/cluster/internal/create/actions/kubeadminit/init.go:159-168 (exclude-from-external-load-balancers));
	// the harness removes it from every control-plane node after create, whatever the count.
	ExcludeFromExternalLBLabel = "node.kubernetes.io/exclude-from-external-load-balancers"
	// MetalLBNamespace is where the platform's MetalLB package runs (catalog: cozy-metallb).
	MetalLBNamespace = "cozy-metallb"
	// MetalLBSpeakerSelector selects the speaker DaemonSet's pods
	// (packages/system/metallb/charts/metallb/templates/speaker.yaml:158 at v1.6.2).
	MetalLBSpeakerSelector = "app.kubernetes.io/component=speaker"
)

// Credentials of the platform's registry (E2E_PLATFORM_REGISTRY with a login).
const (
	// KubeletDockerConfig is where kind's guide mounts a docker config.json to give every node's
	// kubelet registry credentials (kind site/content/docs/user/private-registries.md, "Mount a
	// Config File to Each Node", at fed268827e21); the kubelet reads config.json from its root
	// directory (k8s.io/kubernetes v1.35.4 cmd/kubelet/app/server.go:1228,
	// pkg/credentialprovider/config.go:69-101) and passes the credentials to containerd with each
	// image pull.
	KubeletDockerConfig = "/var/lib/kubelet/config.json"
	// PlatformSourceSecretFlag names a kubernetes.io/dockerconfigjson Secret in cozy-system that
	// the operator sets as secretRef of the OCIRepository it generates for the packages artifact
	// (cmd/cozystack-operator/main.go:143, 594-598 at main and v1.6.2; the installer renders it
	// from cozystackOperator.platformSourceSecret, templates/cozystack-operator.yaml:194-196).
	PlatformSourceSecretFlag = "--platform-source-secret"
	// PlatformSourceSecretNamespace is the Secret's namespace.
	PlatformSourceSecretNamespace = "cozy-system"
)

// The tenant Kubernetes chart's pods on the management cluster, per Kubernetes app, at
// CozystackMain (packages/apps/kubernetes): the KamajiControlPlane's replicas
// (controlPlane.replicas 2, values.yaml:247; templates/cluster.yaml:521), and one each of the
// kubevirt cloud controller manager (templates/kccm/manager.yaml:9), the kubevirt CSI controller
// (templates/csi/deploy.yaml:9) and the cluster autoscaler
// (templates/cluster-autoscaler/deployment.yaml:23). The root tenant's etcd runs 3 replicas
// (packages/extra/etcd/values.yaml:15).
const (
	TenantControlPlaneReplicas = 2
	TenantChartSingletons      = 3
	RootEtcdReplicas           = 3
)

// NodeAssumptions are the facts above with their sources; docs/upstream.md names each.
func NodeAssumptions() []Assumption {
	return []Assumption{
		{"KubeletMaxPods", "maxPods: 512", "hack/e2e-prepare-cluster.bats:132"},
		{"GenericGuideMaxPods", "max-pods=220", "generic.md:134"},
		{"KubeletDefaultMaxPods", "110", "pkg/kubelet/apis/config/v1beta1/defaults.go:194-195"},
		{"DeviceOwnershipKey", DeviceOwnershipKey + " = true", "hack/e2e-prepare-cluster.bats:170-171"},
		{"CRIPluginV2", CRIPluginV2, "plugins/cri/runtime/plugin.go:197-247"},
		{"KubeletDockerConfig", KubeletDockerConfig, "pkg/credentialprovider/config.go:69-101"},
		{"ExcludeFromExternalLBLabel", ExcludeFromExternalLBLabel, "markcontrolplane.go:31-34"},
		{"MetalLBIgnoreExcludeLB", "ignoreExcludeLB: false", "packages/system/metallb/charts/metallb/values.yaml:270"},
		{"MetalLBSpeakerSelector", MetalLBSpeakerSelector, "templates/speaker.yaml:158"},
		{"PlatformSourceSecretFlag", PlatformSourceSecretFlag, "cmd/cozystack-operator/main.go:143"},
		{"TenantControlPlaneReplicas", "controlPlane.replicas 2", "values.yaml:247"},
		{"RootEtcdReplicas", "replicas: 3", "packages/extra/etcd/values.yaml:15"},
	}
}
