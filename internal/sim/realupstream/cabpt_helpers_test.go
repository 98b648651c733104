package realupstream_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// cozystackWorkerConfig is the worker machine configuration the talos-reconcile Job of the
// Cozystack v1.6.1 Kubernetes chart applies in its TalosConfigTemplate (templates/talos/
// talos-reconcile-job.yaml lines 336-443), with its shell variables given values of the right
// shape (fresh CAs, tokens in Talos's formats) and a node group sized 2 cpu / 4Gi.
func cozystackWorkerConfig(t *testing.T, release, ns string) string {
	t.Helper()
	talosCA, err := controlplane.NewCA("talos-ca")
	if err != nil {
		t.Fatal(err)
	}
	k8sCA, err := controlplane.NewCA("kubernetes-ca")
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	r := strings.NewReplacer(
		"${RELEASE}", release, "${NS}", ns,
		"${TALOS_TOKEN}", "y1tc9q.0bjm3jzwh3v4tf8b", "${COREDNS_IP}", "10.96.0.10", "${SVC_IP}", "10.96.12.34",
		"${TALOS_CA_B64}", b64(talosCA.CertPEM), "${K8S_CA_B64}", b64(k8sCA.CertPEM),
		"${CLUSTER_ID}", b64([]byte("0123456789abcdef0123456789abcdef")), "${CLUSTER_SECRET}", b64([]byte("fedcba9876543210fedcba9876543210")),
		"${BOOTSTRAP_TOKEN}", "abcdef.0123456789abcdef",
	)
	return r.Replace(`version: v1alpha1
persist: true
machine:
  type: worker
  token: ${TALOS_TOKEN}
  network:
    # Management CoreDNS as the worker's host resolver.
    nameservers:
      - ${COREDNS_IP}
    searchDomains:
      - svc.cozy.local
      - cozy.local
      - svc.cluster.local
      - cluster.local
    extraHostEntries:
      - ip: ${SVC_IP}
        aliases:
          - ${RELEASE}.${NS}.svc
          - ${RELEASE}.${NS}.svc.cozy.local
  ca:
    crt: ${TALOS_CA_B64}
  kubelet:
    image: ghcr.io/siderolabs/kubelet:v1.35.4
    extraConfig:
      systemReserved:
        cpu: "100m"
        memory: "256Mi"
      kubeReserved:
        cpu: "100m"
        memory: "256Mi"
      evictionHard:
        memory.available: "7%"
        nodefs.available: "10%"
        imagefs.available: "15%"
        nodefs.inodesFree: "5%"
      evictionSoft:
        memory.available: "10%"
        nodefs.available: "15%"
        imagefs.available: "20%"
      evictionSoftGracePeriod:
        memory.available: "1m30s"
        nodefs.available: "1m30s"
        imagefs.available: "1m30s"
      evictionMinimumReclaim:
        memory.available: "256Mi"
  install:
    disk: /dev/vda
    image: factory.talos.dev/installer/ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515:v1.13.6
    wipe: false
  features:
    rbac: true
    kubePrism:
      enabled: false
cluster:
  id: ${CLUSTER_ID}
  secret: ${CLUSTER_SECRET}
  controlPlane:
    endpoint: https://${RELEASE}.${NS}.svc:6443
  clusterName: ${RELEASE}
  network:
    dnsDomain: cozy.local
    podSubnets:
      - 10.243.0.0/16
    serviceSubnets:
      - 10.95.0.0/16
  token: ${BOOTSTRAP_TOKEN}
  ca:
    crt: ${K8S_CA_B64}
  discovery:
    enabled: true
    registries:
      kubernetes:
        disabled: true
      service:
        disabled: true
`)
}

func secret(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatalf("Secret %s/%s: %v", ns, name, err)
	}
	return &s
}

func ownedBy(o metav1.Object, kind, name string) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.Kind == kind && r.Name == name && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

func keys(s *corev1.Secret) []string {
	var out []string
	for k := range s.Data {
		out = append(out, k)
	}
	return out
}

func first(u *unstructured.Unstructured, fields ...string) string {
	l, _, _ := unstructured.NestedStringSlice(u.Object, fields...)
	if len(l) == 0 {
		return ""
	}
	return l[0]
}

func yamlOf(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
