package kamaji

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kinds this stand-in reads and writes.
var (
	KamajiControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KamajiControlPlane"}
	TenantControlPlaneGVK = schema.GroupVersionKind{Group: "kamaji.clastix.io", Version: "v1alpha1", Kind: "TenantControlPlane"}
	kubevirtClusterGVK    = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtCluster"}
)

const (
	// AdminKubeconfigKey and AdminKubeconfigSvcKey are keys of <R>-admin-kubeconfig.
	AdminKubeconfigKey    = "super-admin.conf"
	AdminKubeconfigSvcKey = "super-admin.svc"
	// KubeconfigKey is the key of the Cluster API kubeconfig Secret <R>-kubeconfig.
	KubeconfigKey = "value"
	// KubeletConfigMap is Kamaji's kubelet configuration in the tenant (kube-system), under KubeletConfigKey.
	KubeletConfigMap = "kubelet-config"
	KubeletConfigKey = "kubelet"
	// CoreDNSService is the tenant's cluster DNS Service in kube-system.
	CoreDNSService = "kube-dns"
	// CanarySecret is the Secret the sim plants in the tenant cluster (kube-system).
	CanarySecret = "sim-canary"
	// CanaryKey is its key.
	CanaryKey = "value"
	// DefaultServiceCIDR is the tenant Service range the chart renders on the Cluster.
	DefaultServiceCIDR = "10.95.0.0/16"
	// GuestNodeAnnotation marks the tenant Nodes the tenant kwok plays (set by the guest stand-in).
	GuestNodeAnnotation = "kwok.x-k8s.io/node"
)

// AdminKubeconfigSecret and KubeconfigSecret name the Secrets of control plane r.
func AdminKubeconfigSecret(r string) string { return r + "-admin-kubeconfig" }
func KubeconfigSecret(r string) string      { return r + "-kubeconfig" }

// DNSServiceIP is the tenant CoreDNS ClusterIP derived from the Service CIDR, the tenth address
// (10.95.0.0/16 gives 10.95.0.10), as Kamaji and the chart's helper derive it.
func DNSServiceIP(serviceCIDR string) (string, error) { return NthServiceIP(serviceCIDR, 10) }

// NthServiceIP is the n-th address of serviceCIDR after its base.
func NthServiceIP(serviceCIDR string, n int) (string, error) {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		return "", fmt.Errorf("service CIDR %q: %w", serviceCIDR, err)
	}
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	if !p.Contains(a) {
		return "", fmt.Errorf("service CIDR %q is too small for address %d", serviceCIDR, n)
	}
	return a.String(), nil
}
