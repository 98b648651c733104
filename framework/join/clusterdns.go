package join

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// clusterDNSFailure: a kubeadm-joined pool's kubelets take clusterDNS from the tenant
// kube-system/kubelet-config, which Kamaji writes from the TenantControlPlane's dnsServiceIPs
// (clastix/kamaji internal/kubeadm/uploadconfig.go:84); it must be the tenant CoreDNS
// Service's address, or pods on those Nodes get no cluster DNS. Judged once a Machine of the
// pool is about to join (its VMI runs), when the configuration it will read is final.
func clusterDNSFailure(s *snapshot) *terminal {
	if !s.Pool.OS.Kubeadm || s.KubeletConfig == nil {
		return nil
	}
	joining := false
	for _, m := range s.Machines {
		if m.VMI != nil && m.VMI.Status.Phase == kubevirtv1.Running {
			joining = true
		}
	}
	if !joining {
		return nil
	}
	dns := ClusterDNS(s.KubeletConfig)
	where := fmt.Sprintf("the tenant %s/%s", s.KubeletConfig.Namespace, s.KubeletConfig.Name)
	switch {
	case len(dns) == 0:
		return &terminal{Class: verdict.ClusterDNS, Stage: StageJoin,
			Detail: fmt.Sprintf("%s carries no clusterDNS, so the kubeadm-joined workers of pool %s get no cluster DNS (Kamaji writes it from spec.network.dnsServiceIPs of KamajiControlPlane %s)",
				where, s.Pool.Names.Pool, s.Pool.Names.ControlPlane())}
	case s.ClusterDNSService != nil && s.ClusterDNSService.Spec.ClusterIP != "" && !slices.Contains(dns, s.ClusterDNSService.Spec.ClusterIP):
		svc := s.ClusterDNSService
		return &terminal{Class: verdict.ClusterDNS, Stage: StageJoin,
			Detail: fmt.Sprintf("%s sets clusterDNS %v, but the tenant CoreDNS Service %s/%s is at %s: the kubeadm-joined workers of pool %s would resolve nothing (check spec.network.dnsServiceIPs of KamajiControlPlane %s)",
				where, dns, svc.Namespace, svc.Name, svc.Spec.ClusterIP, s.Pool.Names.Pool, s.Pool.Names.ControlPlane())}
	}
	return nil
}

// ClusterDNS is the clusterDNS list of a kubelet-config ConfigMap (empty when absent).
func ClusterDNS(cm *corev1.ConfigMap) []string {
	var kc struct {
		ClusterDNS []string `json:"clusterDNS"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data[tenant.KubeletConfigKey]), &kc); err != nil {
		return nil
	}
	return kc.ClusterDNS
}
