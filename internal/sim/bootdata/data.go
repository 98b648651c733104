package bootdata

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// The NodeGroupClass spec.os values the data comes from (#4911: talos and kairos).
const (
	osTalos  = "talos"
	osKairos = "kairos"
)

// Data is what a guest learns from its bootstrap data.
type Data struct {
	// OS is "talos" or "kairos".
	OS string
	// NodeName is the name the kubelet registers under when the data names one (kubeadm's
	// nodeRegistration.name); empty means the host's name.
	NodeName string
	// Hostname is the host name the data sets (Talos machine.network.hostname, Kairos
	// hostname, possibly a template such as "metal-{{ trunc 4 .MachineID }}"); empty means the
	// instance's name from the cloud-init metadata.
	Hostname string
	// KubernetesVersion is the kubelet's version ("v1.35.4"), empty when the data does not say.
	KubernetesVersion string
	// Endpoint is the tenant API server the worker joins (a URL for Talos, host:port for kubeadm).
	Endpoint string
	// Kubeadm is true when the worker joins with kubeadm (which reads kube-system/kubelet-config).
	Kubeadm bool
	// ProviderID is the kubelet's --provider-id when the data passes one ("" otherwise).
	ProviderID string
	// PatchProviderID is the providerID a post-bootstrap step patches onto the worker's Node
	// once it registered (Kairos), "" when the data has no such step.
	PatchProviderID string

	// BootstrapToken is the kubelet's bootstrap credential, a kubeadm-format token
	// "<id>.<secret>" (Talos cluster.token; kubeadm's discovery bootstrap token).
	BootstrapToken string
	// ClusterCA is the PEM certificate the kubelet trusts the apiserver by (Talos cluster.ca.crt).
	ClusterCA []byte
	// MachineToken is Talos' machine.token, the trustd token a worker presents for its machine
	// (apid) certificate; the kubelet's join does not use it.
	MachineToken string
	// Hosts are the worker's extra /etc/hosts entries (Talos machine.network.extraHostEntries):
	// alias to address.
	Hosts map[string]string

	// Talos holds what only a Talos worker's OS reads from its machine configuration (nil for
	// Kairos): the rest of what its kubelet is started with.
	Talos *Talos
}

// Talos is the part of a Talos worker's machine configuration that decides how its kubelet runs,
// beyond the join's credentials (github.com/siderolabs/talos/pkg/machinery v1.13.6
// config/types/v1alpha1/v1alpha1_types.go: machine.kubelet :690-790,
// machine.network, machine.features.kubePrism :2394-2416, cluster.network, cluster.acceptedCAs
// :499).
type Talos struct {
	// KubeletExtraConfig is machine.kubelet.extraConfig, KubeletConfiguration fields as written.
	KubeletExtraConfig map[string]any
	// KubeletExtraArgs is machine.kubelet.extraArgs.
	KubeletExtraArgs map[string]string
	// KubeletClusterDNS is machine.kubelet.clusterDNS.
	KubeletClusterDNS []string
	// Nameservers and SearchDomains are machine.network's: the host's resolver.
	Nameservers, SearchDomains []string
	// NodeLabels is machine.nodeLabels.
	NodeLabels map[string]string
	// KubePrism is machine.features.kubePrism.enabled, KubePrismPort its port (0: Talos' 7445).
	KubePrism     bool
	KubePrismPort int
	// ExternalCloudProvider is cluster.externalCloudProvider.enabled.
	ExternalCloudProvider bool
	// DNSDomain is cluster.network.dnsDomain; PodSubnets and ServiceSubnets cluster.network's.
	DNSDomain                  string
	PodSubnets, ServiceSubnets []string
	// AcceptedCAs are cluster.acceptedCAs' certificates, PEM, trusted beside ClusterCA.
	AcceptedCAs [][]byte
	// Mirrors is machine.registries.mirrors: the endpoints a registry's images are pulled from.
	Mirrors map[string]Mirror
	// Env is machine.env: environment variables for the OS's services (v1alpha1_types.go:322).
	Env map[string]string
}

// Mirror is one registry's mirror configuration (machine.registries.mirrors.<registry>).
type Mirror struct {
	Endpoints    []string `json:"endpoints"`
	SkipFallback bool     `json:"skipFallback"`
}

// talosConfig is the part of a Talos v1alpha1 machine configuration a worker's join reads
// (github.com/siderolabs/talos/pkg/machinery v1.13.0 config/types/v1alpha1/v1alpha1_types.go).
type talosConfig struct {
	Machine struct {
		Type    string `json:"type"`
		Token   string `json:"token"`
		CA      *pki   `json:"ca"`
		Kubelet struct {
			Image       string            `json:"image"`
			ExtraConfig map[string]any    `json:"extraConfig"`
			ExtraArgs   map[string]string `json:"extraArgs"`
			ClusterDNS  []string          `json:"clusterDNS"`
		} `json:"kubelet"`
		NodeLabels map[string]string `json:"nodeLabels"`
		Env        map[string]string `json:"env"`
		Registries struct {
			Mirrors map[string]Mirror `json:"mirrors"`
		} `json:"registries"`
		Features struct {
			KubePrism struct {
				Enabled bool `json:"enabled"`
				Port    int  `json:"port"`
			} `json:"kubePrism"`
		} `json:"features"`
		Network struct {
			Nameservers      []string `json:"nameservers"`
			SearchDomains    []string `json:"searchDomains"`
			Hostname         string   `json:"hostname"`
			ExtraHostEntries []struct {
				IP      string   `json:"ip"`
				Aliases []string `json:"aliases"`
			} `json:"extraHostEntries"`
		} `json:"network"`
	} `json:"machine"`
	Cluster struct {
		ControlPlane struct {
			Endpoint string `json:"endpoint"`
		} `json:"controlPlane"`
		Token       string `json:"token"`
		CA          *pki   `json:"ca"`
		AcceptedCAs []pki  `json:"acceptedCAs"`
		Network     struct {
			DNSDomain      string   `json:"dnsDomain"`
			PodSubnets     []string `json:"podSubnets"`
			ServiceSubnets []string `json:"serviceSubnets"`
		} `json:"network"`
		ExternalCloudProvider struct {
			Enabled bool `json:"enabled"`
		} `json:"externalCloudProvider"`
	} `json:"cluster"`
}

// pki is a Talos PEM pair, each base64-encoded.
type pki struct {
	Crt string `json:"crt"`
	Key string `json:"key"`
}

// Parse reads bootstrap data: a Kairos #cloud-config, or a Talos machine configuration (its
// v1alpha1 document among the documents the Talos bootstrap provider writes). A Talos
// configuration Talos itself would refuse to load is an error quoting Talos' validation: a
// missing or unparsable control plane endpoint, a machine without an issuing CA
// (config/types/v1alpha1/v1alpha1_validation.go:139-141 and 417-423), a CA that is not base64.
func Parse(data []byte) (Data, error) {
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("#cloud-config")) {
		return parseKairos(data)
	}
	var doc talosConfig
	found := false
	for _, part := range splitDocuments(data) {
		var d talosConfig
		if err := yaml.Unmarshal(part, &d); err != nil {
			return Data{}, fmt.Errorf("bootstrap data is neither a #cloud-config nor a Talos machine configuration: %v", err)
		}
		if d.Machine.Type != "" {
			doc, found = d, true
			break
		}
	}
	if !found {
		return Data{}, fmt.Errorf("bootstrap data is neither a #cloud-config nor a Talos machine configuration (no document with machine.type)")
	}
	d := Data{OS: osTalos, Hostname: doc.Machine.Network.Hostname, Endpoint: doc.Cluster.ControlPlane.Endpoint,
		BootstrapToken: doc.Cluster.Token, MachineToken: doc.Machine.Token, Hosts: map[string]string{}}
	if img := doc.Machine.Kubelet.Image; img != "" {
		if i := strings.LastIndex(img, ":"); i > 0 && !strings.Contains(img[i:], "/") {
			d.KubernetesVersion = img[i+1:]
		}
	}
	for _, e := range doc.Machine.Network.ExtraHostEntries {
		for _, a := range e.Aliases {
			d.Hosts[a] = e.IP
		}
	}
	if d.Endpoint == "" {
		return d, fmt.Errorf("cluster controlplane endpoint is required")
	}
	if u, err := url.Parse(d.Endpoint); err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return d, fmt.Errorf("invalid controlplane endpoint: %q", d.Endpoint)
	}
	if doc.Machine.CA == nil || doc.Machine.CA.Crt == "" {
		return d, fmt.Errorf("issuing CA or some accepted CAs are required (.machine.ca, machine.acceptedCAs)")
	}
	if doc.Cluster.CA != nil && doc.Cluster.CA.Crt != "" {
		ca, err := base64.StdEncoding.DecodeString(doc.Cluster.CA.Crt)
		if err != nil {
			return d, fmt.Errorf("cluster.ca.crt is not base64: %v", err)
		}
		d.ClusterCA = ca
	}
	m, c := doc.Machine, doc.Cluster
	d.Talos = &Talos{KubeletExtraConfig: m.Kubelet.ExtraConfig, KubeletExtraArgs: m.Kubelet.ExtraArgs,
		KubeletClusterDNS: m.Kubelet.ClusterDNS, Nameservers: m.Network.Nameservers, SearchDomains: m.Network.SearchDomains,
		NodeLabels: m.NodeLabels, KubePrism: m.Features.KubePrism.Enabled, KubePrismPort: m.Features.KubePrism.Port,
		ExternalCloudProvider: c.ExternalCloudProvider.Enabled, DNSDomain: c.Network.DNSDomain,
		PodSubnets: c.Network.PodSubnets, ServiceSubnets: c.Network.ServiceSubnets, Mirrors: m.Registries.Mirrors, Env: m.Env}
	for i, a := range c.AcceptedCAs {
		crt, err := base64.StdEncoding.DecodeString(a.Crt)
		if err != nil {
			return d, fmt.Errorf("cluster.acceptedCAs[%d].crt is not base64: %v", i, err)
		}
		d.Talos.AcceptedCAs = append(d.Talos.AcceptedCAs, crt)
	}
	return d, nil
}

// splitDocuments splits a multi-document YAML at its "---" lines.
func splitDocuments(data []byte) [][]byte {
	var out [][]byte
	for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(part) != "" {
			out = append(out, []byte(part))
		}
	}
	return out
}

// providerIDPatch is the post-bootstrap step's patch of its Node's providerID (postBootstrap).
var providerIDPatch = regexp.MustCompile(`patch node .*"providerID":"([^"]+)"`)

func parseKairos(data []byte) (Data, error) {
	var doc struct {
		Hostname string `json:"hostname"`
		Cluster  struct {
			ControlPlaneHost string `json:"control_plane_host"`
			Config           string `json:"config"`
		} `json:"cluster"`
		Stages map[string][]struct {
			Commands []string `json:"commands"`
		} `json:"stages"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Data{}, fmt.Errorf("#cloud-config: %w", err)
	}
	var opts struct {
		ClusterConfiguration struct {
			KubernetesVersion string `json:"kubernetesVersion"`
		} `json:"clusterConfiguration"`
		JoinConfiguration struct {
			Discovery struct {
				BootstrapToken struct {
					APIServerEndpoint string `json:"apiServerEndpoint"`
					Token             string `json:"token"`
				} `json:"bootstrapToken"`
			} `json:"discovery"`
			NodeRegistration struct {
				Name             string `json:"name"`
				KubeletExtraArgs []struct {
					Name  string `json:"name"`
					Value string `json:"value"`
				} `json:"kubeletExtraArgs"`
			} `json:"nodeRegistration"`
		} `json:"joinConfiguration"`
	}
	if err := yaml.Unmarshal([]byte(doc.Cluster.Config), &opts); err != nil {
		return Data{}, fmt.Errorf("#cloud-config cluster.config: %w", err)
	}
	providerID := ""
	for _, a := range opts.JoinConfiguration.NodeRegistration.KubeletExtraArgs {
		if a.Name == "provider-id" {
			providerID = a.Value
		}
	}
	patch := ""
	for _, steps := range doc.Stages {
		for _, st := range steps {
			for _, c := range st.Commands {
				if m := providerIDPatch.FindStringSubmatch(c); m != nil {
					patch = m[1]
				}
			}
		}
	}
	return Data{
		OS: osKairos, Kubeadm: true, Hostname: doc.Hostname, ProviderID: providerID, PatchProviderID: patch,
		NodeName:          opts.JoinConfiguration.NodeRegistration.Name,
		KubernetesVersion: opts.ClusterConfiguration.KubernetesVersion,
		Endpoint:          opts.JoinConfiguration.Discovery.BootstrapToken.APIServerEndpoint,
		BootstrapToken:    opts.JoinConfiguration.Discovery.BootstrapToken.Token,
	}, nil
}
