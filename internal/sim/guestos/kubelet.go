package guestos

import (
	"fmt"
	"net/netip"
	"sort"

	"sigs.k8s.io/yaml"
)

// protected are the KubeletConfiguration fields machine.kubelet.extraConfig may not set
// (github.com/siderolabs/talos/pkg/machinery v1.13.6 kubelet/kubelet.go:10-24; checked at siderolabs/talos v1.13.6
// internal/app/machined/pkg/controllers/k8s/kubelet_spec.go:242-250).
var protected = []string{"apiVersion", "authentication", "authorization", "cgroupRoot", "kind", "kubeletCgroups",
	"port", "protectKernelDefaults", "resolvConf", "rotateCertificates", "systemCgroups", "staticPodPath", "seccompDefault"}

// kubeletConfiguration is /etc/kubernetes/kubelet.yaml as Talos builds it for a worker
// (NewKubeletConfiguration, kubelet_spec.go:263-408): machine.kubelet.extraConfig first, then
// the fields Talos always sets, then its defaults where extraConfig left a field empty. Not
// played: staticPodURL (Talos' own static Pod server, :284): this stand-in serves none.
func kubeletConfiguration(m Machine) ([]byte, error) {
	t := m.Data.Talos
	cfg := map[string]any{}
	for k, v := range t.KubeletExtraConfig {
		cfg[k] = v
	}
	for _, f := range protected {
		if _, ok := cfg[f]; ok {
			return nil, fmt.Errorf("machine.kubelet.extraConfig: field %q can't be overridden", f)
		}
	}
	// Always (kubelet_spec.go:273-308): a worker's, with k8s >= 1.27's runtime endpoint.
	for k, v := range map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		"staticPodPath": "/etc/kubernetes/manifests", "port": 10250,
		"authentication": map[string]any{"x509": map[string]any{"clientCAFile": CACert},
			"webhook": map[string]any{"enabled": true}, "anonymous": map[string]any{"enabled": false}},
		"authorization": map[string]any{"mode": "Webhook"},
		"cgroupRoot":    "/", "systemCgroups": "/system", "kubeletCgroups": "/podruntime/kubelet",
		"rotateCertificates": true, "protectKernelDefaults": true,
		"containerRuntimeEndpoint": "unix://" + CRISocket, "resolvConf": ResolvConf,
	} {
		cfg[k] = v
	}
	dns, err := clusterDNS(t.KubeletClusterDNS, t.ServiceSubnets)
	if err != nil {
		return nil, err
	}
	domain := t.DNSDomain
	if domain == "" {
		domain = "cluster.local" // v1alpha1_clusterconfig.go:239-245
	}
	// Defaults, where extraConfig is silent (kubelet_spec.go:344-403; the worker's
	// systemReserved: github.com/siderolabs/talos/pkg/machinery v1.13.6 constants/constants.go:412-424).
	for k, v := range map[string]any{
		"address": "0.0.0.0", "oomScoreAdj": -450, "clusterDomain": domain, "clusterDNS": dns,
		"serializeImagePulls": false, "failSwapOn": false,
		"systemReserved":      map[string]any{"cpu": "50m", "pid": "100", "ephemeral-storage": "256Mi", "memory": "384Mi"},
		"logging":             map[string]any{"format": "json"},
		"shutdownGracePeriod": "30s", "shutdownGracePeriodCriticalPods": "10s",
		"streamingConnectionIdleTimeout": "5m", "tlsMinVersion": "VersionTLS13",
	} {
		if _, ok := cfg[k]; !ok {
			cfg[k] = v
		}
	}
	return yaml.Marshal(cfg)
}

// clusterDNS is machine.kubelet.clusterDNS, else the tenth address of the first service subnet
// (talos internal/app/machined/pkg/controllers/k8s/kubelet_config.go:59-68;
// v1alpha1_clusterconfig.go:227-236, :258-265: the default subnet 10.96.0.0/12).
func clusterDNS(set, serviceSubnets []string) ([]string, error) {
	if len(set) > 0 {
		return set, nil
	}
	subnet := "10.96.0.0/12"
	if len(serviceSubnets) > 0 {
		subnet = serviceSubnets[0]
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil {
		return nil, fmt.Errorf("cluster.network.serviceSubnets[0] %q: %v", subnet, err)
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	if !p.Contains(a) {
		return nil, fmt.Errorf("cluster.network.serviceSubnets[0] %q has no tenth address", subnet)
	}
	return []string{a.String()}, nil
}

// denied are the kubelet flags machine.kubelet.extraArgs may not set (talos
// kubelet_spec.go:132-195, MergeDenied).
var denied = map[string]bool{"bootstrap-kubeconfig": true, "kubeconfig": true, "container-runtime": true,
	"container-runtime-endpoint": true, "config": true, "cert-dir": true}

// KubeletArgs are the kubelet's flags as Talos passes them to a worker's kubelet: config,
// cert-dir, hostname-override, the kubeconfigs, node-ip, cloud-provider when the cluster has an
// external one, then machine.kubelet.extraArgs over them; sorted, each --key=value
// (kubelet_spec.go:132-195; pkg/argsbuilder/argsbuilder_args.go:109-127).
func KubeletArgs(m Machine) ([]string, error) {
	args := map[string]string{
		"config": KubeletConfig, "cert-dir": KubeletPKIDir, "hostname-override": m.NodeName,
		"bootstrap-kubeconfig": BootstrapKubeconfig, "kubeconfig": Kubeconfig,
	}
	if m.Data.Talos.ExternalCloudProvider {
		args["cloud-provider"] = "external"
	}
	if _, ok := m.Data.Talos.KubeletExtraArgs["node-ip"]; !ok && m.NodeIP != "" {
		args["node-ip"] = m.NodeIP
	}
	for k, v := range m.Data.Talos.KubeletExtraArgs {
		if denied[k] {
			return nil, fmt.Errorf("extra arg %q is not allowed", k)
		}
		args[k] = v
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, "--"+k+"="+args[k])
	}
	return out, nil
}
