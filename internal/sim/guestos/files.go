package guestos

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/internal/sim/bootdata"
)

// The paths Talos writes for its kubelet (github.com/siderolabs/talos/pkg/machinery v1.13.6
// constants/constants.go: :209 KubernetesConfigBaseDir, :221 KubernetesCACert,
// :333 KubeletBootstrapKubeconfig, :348 KubeletPKIDir, :409 KubeletKubeconfig, :541
// CRIContainerdAddress, :693 and :1230-1233 PodResolvConfPath; siderolabs/talos v1.13.6
// internal/app/machined/pkg/controllers/k8s/kubelet_service.go:342-365, the config file).
const (
	BootstrapKubeconfig = "/etc/kubernetes/bootstrap-kubeconfig"
	Kubeconfig          = "/etc/kubernetes/kubeconfig-kubelet"
	CACert              = "/etc/kubernetes/pki/ca.crt"
	KubeletConfig       = "/etc/kubernetes/kubelet.yaml"
	KubeletPKIDir       = "/var/lib/kubelet/pki"
	ResolvConf          = "/system/resolved/resolv.conf"
	CRISocket           = "/run/containerd/containerd.sock"
	// ContainerdConfig and CNIConfig are the stand-in's own: Talos' CRI configuration
	// (hack/cri-containerd.toml) is for its containerd 2; this is Debian's.
	ContainerdConfig = "/etc/cri/containerd.toml"
	CNIConfig        = "/etc/cni/net.d/10-cozy-e2e.conflist"
)

// File is a file the OS writes before its kubelet starts.
type File struct {
	Path string
	Mode uint32
	Data []byte
}

// Files are what the worker writes before its kubelet's first start, from its machine.
func Files(m Machine) ([]File, error) {
	t := m.Data.Talos
	if t.KubePrism {
		// Talos points the kubelet at KubePrism, its local load balancer, when it is on
		// (internal/app/machined/pkg/controllers/secrets/kubelet.go:46-66); the stand-in has none.
		return nil, fmt.Errorf("machine.features.kubePrism.enabled: this OS stand-in runs no KubePrism (Cozystack's chart turns it off)")
	}
	cas := bytes.Join(append([][]byte{m.Data.ClusterCA}, t.AcceptedCAs...), nil)
	if len(bytes.TrimSpace(cas)) == 0 {
		return nil, fmt.Errorf("missing accepted Kubernetes CAs (cluster.ca.crt)")
	}
	kubeconfig, err := bootstrapKubeconfig(m.Data.Endpoint, m.Data.BootstrapToken, cas)
	if err != nil {
		return nil, err
	}
	kubelet, err := kubeletConfiguration(m)
	if err != nil {
		return nil, err
	}
	cni, err := cniConfig(t.PodSubnets)
	if err != nil {
		return nil, err
	}
	mirrors, err := registryHosts(t.Mirrors)
	if err != nil {
		return nil, err
	}
	return append(mirrors, []File{
		{BootstrapKubeconfig, 0o600, kubeconfig},
		{CACert, 0o400, cas},
		{KubeletConfig, 0o600, kubelet},
		{"/etc/hosts", 0o644, hosts(m)},
		{"/etc/hostname", 0o644, []byte(m.Hostname + "\n")},
		{ResolvConf, 0o644, resolvConf(t.Nameservers, t.SearchDomains)},
		{"/etc/resolv.conf", 0o644, resolvConf(t.Nameservers, t.SearchDomains)},
		{ContainerdConfig, 0o644, []byte(containerdConfig)},
		{CNIConfig, 0o644, cni},
	}...), nil
}

// RegistryHosts is where containerd reads each registry's hosts.toml (ContainerdConfig's
// config_path).
const RegistryHosts = "/etc/cri/conf.d/hosts"

// registryHosts are the hosts.toml files of machine.registries.mirrors as Talos writes them
// (siderolabs/talos v1.13.6 internal/pkg/containers/cri/containerd/hosts.go:47-204,
// GenerateHosts: each endpoint a host entry with capabilities pull and resolve, in order; with
// skipFallback the last one is the server instead; :206-218 hostDirectory: "*" is _default, a
// port is _port_; go-toml's single-quoted strings, as hosts_test.go:62 expects them), with
// the [host] table always there (below).
func registryHosts(mirrors map[string]bootdata.Mirror) ([]File, error) {
	names := make([]string, 0, len(mirrors))
	for n := range mirrors {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []File
	for _, name := range names {
		eps := mirrors[name].Endpoints
		if len(eps) == 0 {
			return nil, fmt.Errorf("machine.registries.mirrors.%s: no endpoints", name)
		}
		for _, ep := range eps {
			if u, err := url.Parse(ep); err != nil || u.Host == "" {
				return nil, fmt.Errorf("error parsing endpoint %q for host %q", ep, name)
			}
		}
		var b bytes.Buffer
		if mirrors[name].SkipFallback {
			fmt.Fprintf(&b, "server = '%s'\ncapabilities = ['pull', 'resolve']\n", eps[len(eps)-1])
			eps = eps[:len(eps)-1]
		}
		// Talos writes the [host] table only over host entries; its containerd 2 reads a file
		// without one. Debian's containerd 1.7.24, the stand-in's, refuses such a file ("invalid
		// `host` tree": github.com/containerd/containerd v1.7.24 remotes/docker/config/hosts.go
		// lines 531-535) and then pulls from the registry itself as if there were no file
		// (lines 313-317): with skipFallback and one endpoint, from outside. An empty table is
		// the same file to containerd 2 and a valid one to 1.7.
		b.WriteString("[host]\n")
		for _, ep := range eps {
			fmt.Fprintf(&b, "  [host.'%s']\n    capabilities = ['pull', 'resolve']\n", ep)
		}
		dir := name
		if name == "*" {
			dir = "_default"
		} else if i := strings.LastIndex(name, ":"); i > 0 {
			dir = name[:i] + "_" + name[i+1:] + "_"
		}
		out = append(out, File{Path: RegistryHosts + "/" + dir + "/hosts.toml", Mode: 0o644, Data: b.Bytes()})
	}
	return out, nil
}

// bootstrapKubeconfig is Talos' bootstrap kubeconfig: cluster "local" at the control plane
// endpoint with the accepted CAs, user and context "kubelet@local" with cluster.token
// (internal/app/machined/pkg/controllers/k8s/kubelet_service.go:300-340;
// controllers/secrets/kubelet.go:42-83: on a worker the endpoint is cluster.controlPlane.endpoint
// and the token cluster.token).
func bootstrapKubeconfig(endpoint, token string, cas []byte) ([]byte, error) {
	if id, secret, ok := strings.Cut(token, "."); !ok || id == "" || secret == "" {
		return nil, fmt.Errorf("cluster.token %q is not <id>.<secret>", token)
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config",
		"clusters": []any{map[string]any{"name": "local", "cluster": map[string]any{
			"server": endpoint, "certificate-authority-data": base64.StdEncoding.EncodeToString(cas)}}},
		"users":           []any{map[string]any{"name": "kubelet@local", "user": map[string]any{"token": token}}},
		"contexts":        []any{map[string]any{"name": "kubelet@local", "context": map[string]any{"cluster": "local", "user": "kubelet@local"}}},
		"current-context": "kubelet@local",
	})
}

// hosts is /etc/hosts: localhost, the host's own name at its address, and
// machine.network.extraHostEntries (how Cozystack's workers find the tenant's endpoint:
// cozystack/cozystack v1.6.1 packages/apps/kubernetes/templates/talos/talos-reconcile-job.yaml
// :306-319, :375-379).
func hosts(m Machine) []byte {
	var b bytes.Buffer
	b.WriteString("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
	if m.NodeIP != "" {
		fmt.Fprintf(&b, "%s %s\n", m.NodeIP, m.Hostname)
	}
	byIP := map[string][]string{}
	for alias, ip := range m.Data.Hosts {
		byIP[ip] = append(byIP[ip], alias)
	}
	ips := make([]string, 0, len(byIP))
	for ip := range byIP {
		ips = append(ips, ip)
	}
	sort.Strings(ips)
	for _, ip := range ips {
		sort.Strings(byIP[ip])
		fmt.Fprintf(&b, "%s %s\n", ip, strings.Join(byIP[ip], " "))
	}
	return b.Bytes()
}

// resolvConf is the host's resolver: machine.network.nameservers and searchDomains.
func resolvConf(servers, search []string) []byte {
	var b bytes.Buffer
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	return b.Bytes()
}

// containerdConfig is the stand-in's CRI: Debian's containerd at Talos' socket, the CNI
// plugins where Talos ships them (/opt/cni/bin: siderolabs/talos v1.13.6 Dockerfile:715-716),
// and the registry hosts the OS is given (conf.d/hosts).
const containerdConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "` + CRISocket + `"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "` + RegistryHosts + `"
`

// cniConfig is the pod network of the stand-in: a bridge over the first /24 of the cluster's
// first pod subnet. Talos leaves the CNI to the cluster (flannel by default, deployed by the
// control plane: github.com/siderolabs/talos/pkg/machinery v1.13.6 config/types/v1alpha1/v1alpha1_clusterconfig.go:200-212),
// and Cozystack's tenants bring their own; the stand-in's worker runs its pods on one node.
func cniConfig(podSubnets []string) ([]byte, error) {
	subnet := "10.244.0.0/16"
	if len(podSubnets) > 0 {
		subnet = podSubnets[0]
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil || !p.Addr().Is4() || p.Bits() > 24 {
		return nil, fmt.Errorf("cluster.network.podSubnets[0] %q: want an IPv4 prefix of /24 or wider", subnet)
	}
	node := netip.PrefixFrom(p.Masked().Addr(), 24)
	return []byte(fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "cozy-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
    }
  ]
}
`, node.String())), nil
}
