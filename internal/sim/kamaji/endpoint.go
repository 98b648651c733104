package kamaji

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
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
	if k.opts.AdvertiseAddress == "" {
		return nil
	}
	return k.ensureEndpointSlice(ctx, tcp, u.Port())
}

// ensureEndpointSlice puts the tenant apiserver, listening on this host's address, behind its
// Service, where Kamaji's Deployment's pods would be (the Service selects them): kube-proxy on
// the real Node then carries the Service's ClusterIP, which Cozystack's Talos workers dial by its
// name through /etc/hosts (cozystack/cozystack v1.6.1
// packages/apps/kubernetes/templates/talos/talos-reconcile-job.yaml:306-319, :375-379), to it.
// The slice is the sim's own (its managed-by label), beside the empty one the endpointslice
// controller keeps for the selector, which leaves slices another manages alone (k8s.io/kubernetes
// v1.35.4 pkg/controller/endpointslice/endpointslice_controller.go:76-78, ControllerName;
// k8s.io/endpointslice v0.35.4 reconciler.go:664-669, ManagedByController).
func (k *Kamaji) ensureEndpointSlice(ctx context.Context, tcp *unstructured.Unstructured, port string) error {
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return fmt.Errorf("tenant apiserver port %q: %w", port, err)
	}
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: tcp.GetNamespace(), Name: tcp.GetName() + "-sim"}}
	_, err = controllerutil.CreateOrUpdate(ctx, k.client, es, func() error {
		es.Labels = merge(es.Labels, map[string]string{discoveryv1.LabelServiceName: tcp.GetName(), discoveryv1.LabelManagedBy: "sim.cozy-e2e"})
		es.AddressType = discoveryv1.AddressTypeIPv4
		es.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{k.opts.AdvertiseAddress}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
		es.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("kube-apiserver"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(p))}}
		return controllerutil.SetControllerReference(tcp, es, k.client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("writing EndpointSlice %s/%s: %w", es.Namespace, es.Name, err)
	}
	return nil
}

// kamajiLabels are the labels Kamaji puts on what it makes for a tenant control plane
// (clastix/kamaji internal/utilities/utilities.go:23-29 (ControlPlaneLabelKey),
// internal/constants/labels.go:7-11 (ControlPlaneLabelKey)).
func kamajiLabels(tcp, component string) map[string]string {
	return map[string]string{"kamaji.clastix.io/project": "kamaji", "kamaji.clastix.io/name": tcp, "kamaji.clastix.io/component": component}
}
