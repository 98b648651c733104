package kind

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// ContainerdCertsDir is where the nodes read their registry hosts files.
const ContainerdCertsDir = "/etc/containerd/certs.d"

// ConfigOptions are the facts of the machine and run that the node config depends on.
type ConfigOptions struct {
	// CgroupV1: the runner has cgroup v1, so kubelets from v1.35 on need failCgroupV1: false.
	CgroupV1 bool
	// HostsDir is the folder on the runner holding <registry>/hosts.toml, mounted into every node
	// at ContainerdCertsDir; needed only when the lane names registry mirrors.
	HostsDir string
	// KubeletDockerConfig is a docker config.json on the runner holding the platform registry's
	// credentials, mounted read-only into every node where its kubelet reads one
	// (assumptions.KubeletDockerConfig); empty: none.
	KubeletDockerConfig string
}

// NodeConfig is the generated kind configuration and the registry hosts files it mounts.
type NodeConfig struct {
	Cluster *v1alpha4.Cluster
	// HostsFiles maps a path relative to ConfigOptions.HostsDir to its content.
	HostsFiles map[string]string
}

// NodeImage is the lane's pinned node image, image@digest. A digest marked unknown is refused:
// kind supports a node image only at the digest its release lists.
func NodeImage(l *lane.Lane) (string, string, error) {
	for _, c := range l.Components {
		if c.Name != lane.KindNodeComponent {
			continue
		}
		if c.Digest == "" || c.Digest == lane.DigestUnknown {
			return "", "", fmt.Errorf("%s: components %s: the node image %s:%s has no digest (marked unknown; see its note); kind supports a node image only at the digest its release notes list: pin it",
				l.File, c.Name, c.Image, c.Version)
		}
		return c.Image + ":" + c.Version + "@" + c.Digest, c.Version, nil
	}
	return "", "", fmt.Errorf("%s: components: no %q component pins the kind node image", l.File, lane.KindNodeComponent)
}

// Config generates the kind cluster configuration of a kind lane.
func Config(l *lane.Lane, o ConfigOptions) (*NodeConfig, error) {
	if l.Kind == nil {
		return nil, fmt.Errorf("%s: kind: a kind lane needs its kind section", l.File)
	}
	image, version, err := NodeImage(l)
	if err != nil {
		return nil, err
	}
	k := l.Kind
	c := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     l.Name,
	}
	var mounts []v1alpha4.Mount
	if !k.Emulation {
		// KubeVirt's virt-handler reaches KVM through the node container.
		mounts = append(mounts, v1alpha4.Mount{HostPath: "/dev/kvm", ContainerPath: "/dev/kvm"})
	}
	out := &NodeConfig{Cluster: c, HostsFiles: map[string]string{}}
	// KubeVirt's launcher runs as a non-root user; with the host's /dev/kvm not world-writable it
	// opens the device only if containerd gives it the owner of the container's securityContext.
	c.ContainerdConfigPatches = append(c.ContainerdConfigPatches, DeviceOwnershipPatch)
	if len(k.RegistryMirrors) > 0 {
		if o.HostsDir == "" {
			return nil, fmt.Errorf("kind config: the lane names registry mirrors but no folder was given for their hosts files")
		}
		mounts = append(mounts, v1alpha4.Mount{HostPath: o.HostsDir, ContainerPath: ContainerdCertsDir, Readonly: true})
		c.ContainerdConfigPatches = append(c.ContainerdConfigPatches,
			"["+assumptions.CRIPluginV2+".registry]\n  config_path = \""+ContainerdCertsDir+"\"\n")
		for host, endpoints := range k.RegistryMirrors {
			out.HostsFiles[filepath.Join(host, "hosts.toml")] = hostsTOML(host, endpoints)
		}
	}
	if o.KubeletDockerConfig != "" {
		// kind's way to give every node's kubelet registry credentials (its private registries
		// guide); the kubelet hands them to containerd with each pull.
		mounts = append(mounts, v1alpha4.Mount{HostPath: o.KubeletDockerConfig, ContainerPath: assumptions.KubeletDockerConfig, Readonly: true})
	}
	var ports []v1alpha4.PortMapping
	for _, m := range k.PortMappings {
		ports = append(ports, v1alpha4.PortMapping{
			ContainerPort: int32(m.ContainerPort), HostPort: int32(m.HostPort), ListenAddress: m.ListenAddress,
			Protocol: v1alpha4.PortMappingProtocol(defaultString(m.Protocol, "TCP")),
		})
	}
	c.Nodes = append(c.Nodes, v1alpha4.Node{Role: v1alpha4.ControlPlaneRole, Image: image, ExtraMounts: mounts, ExtraPortMappings: ports})
	for i := 0; i < k.Workers; i++ {
		c.Nodes = append(c.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole, Image: image, ExtraMounts: mounts})
	}
	if n := k.Networking; n != nil {
		c.Networking = v1alpha4.Networking{
			DisableDefaultCNI: n.DisableDefaultCNI, KubeProxyMode: v1alpha4.ProxyMode(n.KubeProxyMode),
			PodSubnet: n.PodSubnet, ServiceSubnet: n.ServiceSubnet,
		}
	}
	// kind has no cluster domain setting (v1alpha4 Networking, types.go:167-197 at v0.33.0):
	// kubeadm's ClusterConfiguration carries it, and kubeadm gives it to the kubelets as
	// clusterDomain. Without it the domain is kubeadm's cluster.local, not the platform's.
	c.KubeadmConfigPatches = append(c.KubeadmConfigPatches,
		"kind: ClusterConfiguration\nnetworking:\n  dnsDomain: "+install.ClusterDomain(l)+"\n")
	c.KubeadmConfigPatches = append(c.KubeadmConfigPatches, kubeletPatch(o.CgroupV1 && minorAtLeast(version, 35)))
	return out, nil
}

// DeviceOwnershipPatch is the containerd patch every node gets: the CRI plugin's
// device_ownership_from_security_context, at the path of the version 2 config kind's node
// images ship (containerd 2.x migrates it; assumptions.CRIPluginV2).
const DeviceOwnershipPatch = "[" + assumptions.CRIPluginV2 + "]\n  " + assumptions.DeviceOwnershipKey + " = true\n"

// kubeletPatch is the KubeletConfiguration patch every node gets: maxPods for the whole
// platform on one node (assumptions.KubeletMaxPods), and on a cgroup v1 runner failCgroupV1: false,
// since kubelet v1.35 defaults it to true and refuses to start there. kind renders the
// KubeletConfiguration as kubelet.config.k8s.io/v1beta1 for every kubeadm API version
// (pkg/cluster/internal/kubeadm/config.go at v0.33.0), the type kubeadm decodes it into
// (k8s.io/kubernetes v1.35.4 cmd/kubeadm/app/componentconfigs/kubelet.go:24).
func kubeletPatch(cgroupV1 bool) string {
	p := fmt.Sprintf("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: %d\n", assumptions.KubeletMaxPods)
	if cgroupV1 {
		p += "failCgroupV1: false\n"
	}
	return p
}

// YAML is the configuration as kind reads it.
func (n *NodeConfig) YAML() ([]byte, error) { return yaml.Marshal(n.Cluster) }

// hostsTOML is containerd's hosts file for one registry: try each mirror, then the registry.
func hostsTOML(host string, endpoints []string) string {
	server := "https://" + host
	if host == "docker.io" {
		server = "https://registry-1.docker.io"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "server = %q\n", server)
	for _, ep := range endpoints {
		fmt.Fprintf(&b, "\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", ep)
	}
	return b.String()
}

// HostsFileNames lists the hosts files in a stable order.
func (n *NodeConfig) HostsFileNames() []string {
	names := make([]string, 0, len(n.HostsFiles))
	for k := range n.HostsFiles {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func minorAtLeast(version string, minor int) bool {
	v := strings.TrimPrefix(version, "v")
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return false
	}
	m, err := strconv.Atoi(parts[1])
	return err == nil && m >= minor
}

func defaultString(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
