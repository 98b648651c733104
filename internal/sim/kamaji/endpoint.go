package kamaji

import (
	"context"
	"fmt"
	"net/url"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// APIServerPort is the TenantControlPlane's spec.networkProfile.port default, its Service's port.
const APIServerPort = 6443

// CASecret is Kamaji's Secret of a tenant's cluster CA, <tcp>-ca (clastix/kamaji
// internal/resources/ca_certificate.go:66-68 (AddTenantPrefix), :82-83 (GetName), the tenant
// prefix of internal/utilities/utilities.go:41-43 (AddTenantPrefix)).
func CASecret(tcp string) string { return tcp + "-ca" }

// ensureEndpoint writes what Kamaji publishes for reaching a tenant control plane before its
// Deployment runs: the CA Secret <tcp>-ca with the keys kubeadm names it by and the TLS keys
// Cluster API reads (clastix/kamaji internal/resources/ca_certificate.go:146-153 (CACertName)),
// and the Service <tcp> (ClusterIP, port kube-apiserver 6443, selecting kamaji.clastix.io/name:
// <tcp>; clastix/kamaji internal/resources/k8s_service_resource.go:64-130
// (KubernetesServiceResource)). The sim's apiserver listens on loopback,
// not behind the Service: the Service carries simenv.LoopbackAnnotation with its address, for
// the guest stand-in's network.
func (k *Kamaji) ensureEndpoint(ctx context.Context, tcp *unstructured.Unstructured, api *controlplane.APIServer) error {
	key, err := os.ReadFile(api.CAKeyPath)
	if err != nil {
		return err
	}
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tcp.GetNamespace(), Name: CASecret(tcp.GetName())}}
	if _, err := controllerutil.CreateOrUpdate(ctx, k.client, ca, func() error {
		ca.Labels = merge(ca.Labels, kamajiLabels(tcp.GetName(), "ca"))
		ca.Data = map[string][]byte{"ca.crt": api.CA.CertPEM, "ca.key": key, corev1.TLSCertKey: api.CA.CertPEM, corev1.TLSPrivateKeyKey: key}
		return controllerutil.SetControllerReference(tcp, ca, k.client.Scheme())
	}); err != nil {
		return fmt.Errorf("writing Secret %s/%s: %w", ca.Namespace, ca.Name, err)
	}
	u, err := url.Parse(api.URL)
	if err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tcp.GetNamespace(), Name: tcp.GetName()}}
	if _, err := controllerutil.CreateOrUpdate(ctx, k.client, svc, func() error {
		svc.Labels = merge(svc.Labels, kamajiLabels(tcp.GetName(), "service"))
		svc.Annotations = merge(svc.Annotations, map[string]string{simenv.LoopbackAnnotation: u.Host})
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.Selector = map[string]string{"kamaji.clastix.io/name": tcp.GetName()}
		svc.Spec.Ports = []corev1.ServicePort{{Name: "kube-apiserver", Protocol: corev1.ProtocolTCP, Port: APIServerPort,
			TargetPort: intstr.FromInt32(APIServerPort)}}
		return controllerutil.SetControllerReference(tcp, svc, k.client.Scheme())
	}); err != nil {
		return fmt.Errorf("writing Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// kamajiLabels are the labels Kamaji puts on what it makes for a tenant control plane
// (clastix/kamaji internal/utilities/utilities.go:23-29 (ControlPlaneLabelKey),
// internal/constants/labels.go:7-11 (ControlPlaneLabelKey)).
func kamajiLabels(tcp, component string) map[string]string {
	return map[string]string{"kamaji.clastix.io/project": "kamaji", "kamaji.clastix.io/name": tcp, "kamaji.clastix.io/component": component}
}
