package bootstrap

import (
	"bytes"
	"fmt"
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
	// Endpoint is the tenant API server the worker joins.
	Endpoint string
	// Kubeadm is true when the worker joins with kubeadm (which reads kube-system/kubelet-config).
	Kubeadm bool
	// ProviderID is the kubelet's --provider-id when the data passes one ("" otherwise).
	ProviderID string
}

// Parse reads bootstrap data: a Talos machine configuration or a Kairos #cloud-config.
func Parse(data []byte) (Data, error) {
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("#cloud-config")) {
		return parseKairos(data)
	}
	var doc struct {
		Machine struct {
			Type    string `json:"type"`
			Kubelet struct {
				Image string `json:"image"`
			} `json:"kubelet"`
			Network struct {
				Hostname string `json:"hostname"`
			} `json:"network"`
		} `json:"machine"`
		Cluster struct {
			ControlPlane struct {
				Endpoint string `json:"endpoint"`
			} `json:"controlPlane"`
		} `json:"cluster"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil || doc.Machine.Type == "" {
		return Data{}, fmt.Errorf("bootstrap data is neither a #cloud-config nor a Talos machine configuration (machine.type): %v", err)
	}
	d := Data{OS: osTalos, Hostname: doc.Machine.Network.Hostname, Endpoint: doc.Cluster.ControlPlane.Endpoint}
	if img := doc.Machine.Kubelet.Image; img != "" {
		if i := strings.LastIndex(img, ":"); i > 0 && !strings.Contains(img[i:], "/") {
			d.KubernetesVersion = img[i+1:]
		}
	}
	return d, nil
}

func parseKairos(data []byte) (Data, error) {
	var doc struct {
		Hostname string `json:"hostname"`
		Cluster  struct {
			ControlPlaneHost string `json:"control_plane_host"`
			Config           string `json:"config"`
		} `json:"cluster"`
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
	return Data{
		OS: osKairos, Kubeadm: true, Hostname: doc.Hostname, ProviderID: providerID,
		NodeName:          opts.JoinConfiguration.NodeRegistration.Name,
		KubernetesVersion: opts.ClusterConfiguration.KubernetesVersion,
		Endpoint:          opts.JoinConfiguration.Discovery.BootstrapToken.APIServerEndpoint,
	}, nil
}
