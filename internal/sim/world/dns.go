package world

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// createDNSService creates the management cluster's CoreDNS Service, kube-system/kube-dns on the
// tenth address of the Service range (kubeadm's choice, which the platform's CoreDNS keeps). No
// DNS server runs behind it: the platform's Talos reconcile Job reads its ClusterIP to give the
// workers as their host resolver (cozystack/cozystack v1.6.1 packages/apps/kubernetes/templates/
// talos/talos-reconcile-job.yaml:282), and waits for it until it exists.
func createDNSService(ctx context.Context, c *cluster.Cluster, serviceCIDR string) error {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		return fmt.Errorf("world: service CIDR %q: %w", serviceCIDR, err)
	}
	ip := p.Masked().Addr()
	for range 10 {
		ip = ip.Next()
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns",
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: ip.String(),
			Selector:  map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
			},
		},
	}
	if err := c.Client.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("world: Service kube-system/kube-dns: %w", err)
	}
	return nil
}
