package kamaji

import (
	"context"
	"fmt"
	"strings"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// ensureTenantObjects writes what Kamaji and the platform put into the tenant cluster:
// kube-system/kubelet-config (clusterDNS from the TenantControlPlane's dnsServiceIPs, absent
// when the list is empty), the CoreDNS Service on the address derived from the Service CIDR,
// the bootstrap-token RBAC of kubeadm's phase, and the canary Secret.
func (k *Kamaji) ensureTenantObjects(ctx context.Context, t *tenantCP, serviceCIDR string, dnsIPs []string) error {
	c := t.client.Client
	var kubelet strings.Builder
	kubelet.WriteString("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	kubelet.WriteString("authentication:\n  anonymous:\n    enabled: false\n  webhook:\n    enabled: true\n  x509:\n    clientCAFile: /etc/kubernetes/pki/ca.crt\n")
	kubelet.WriteString("authorization:\n  mode: Webhook\ncgroupDriver: systemd\nclusterDomain: cluster.local\n")
	if len(dnsIPs) > 0 {
		kubelet.WriteString("clusterDNS:\n")
		for _, ip := range dnsIPs {
			fmt.Fprintf(&kubelet, "- %s\n", ip)
		}
	}
	kubelet.WriteString("rotateCertificates: true\nstaticPodPath: /etc/kubernetes/manifests\n")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: KubeletConfigMap}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, cm, func() error {
		cm.Data = map[string]string{KubeletConfigKey: kubelet.String()}
		return nil
	}); err != nil {
		return fmt.Errorf("ConfigMap kube-system/%s: %w", KubeletConfigMap, err)
	}
	dnsIP, err := DNSServiceIP(serviceCIDR)
	if err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: CoreDNSService}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, svc, func() error {
		svc.Labels = map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = dnsIP
		}
		svc.Spec.Selector = map[string]string{"k8s-app": "kube-dns"}
		svc.Spec.Ports = []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
		}
		return nil
	}); err != nil {
		return fmt.Errorf("tenant Service kube-system/%s: %w", CoreDNSService, err)
	}
	if err := EnsureBootstrapTokenRBAC(ctx, c); err != nil {
		return err
	}
	canary := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: CanarySecret}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, canary, func() error {
		canary.Data = map[string][]byte{CanaryKey: []byte(k.opts.Canary)}
		return nil
	}); err != nil {
		return fmt.Errorf("tenant Secret kube-system/%s: %w", CanarySecret, err)
	}
	return nil
}

// ensureSecrets writes Kamaji's admin kubeconfig Secret (owned by the TenantControlPlane) and
// the Cluster API kubeconfig Secret the provider copies from it (owned by the control plane,
// labelled with the cluster name, type cluster.x-k8s.io/secret).
func (k *Kamaji) ensureSecrets(ctx context.Context, kcp, tcp *unstructured.Unstructured, api *controlplane.APIServer, dir string) error {
	r := kcp.GetName()
	kc, err := kubeconfigFor(api, dir, r)
	if err != nil {
		return err
	}
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kcp.GetNamespace(), Name: AdminKubeconfigSecret(r)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, k.client, admin, func() error {
		admin.Labels = merge(admin.Labels, map[string]string{"kamaji.clastix.io/name": r, "kamaji.clastix.io/component": "admin-kubeconfig"})
		admin.Data = map[string][]byte{AdminKubeconfigKey: kc, AdminKubeconfigSvcKey: kc}
		return controllerutil.SetControllerReference(tcp, admin, k.client.Scheme())
	}); err != nil {
		return fmt.Errorf("admin kubeconfig Secret %s/%s: %w", admin.Namespace, admin.Name, err)
	}
	capi := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kcp.GetNamespace(), Name: KubeconfigSecret(r)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, k.client, capi, func() error {
		capi.Labels = merge(capi.Labels, map[string]string{clusterv1.ClusterNameLabel: r})
		capi.Type = clusterv1.ClusterSecretType
		capi.Data = map[string][]byte{KubeconfigKey: kc}
		return controllerutil.SetControllerReference(kcp, capi, k.client.Scheme())
	}); err != nil {
		return fmt.Errorf("the Cluster API kubeconfig Secret %s/%s: %w", capi.Namespace, capi.Name, err)
	}
	return nil
}
