package platform

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// What the Cozystack v1.6.1 Kubernetes chart's Talos path reads and writes besides the Cluster
// API objects (packages/apps/kubernetes/templates/talos/): the chart renders <release>-talos-
// secrets (talos-secrets.yaml) and a Certificate cert-manager issues as <release>-talos-ca
// (talos-pki.yaml); its talos-reconcile Job waits for those, Kamaji's <release> Service and
// <release>-ca Secret and the management CoreDNS Service, then applies each Talos pool's
// TalosConfigTemplate (talos-reconcile-job.yaml); its bootstrap-token-tenant hook Job puts the
// bootstrap token into the tenant (bootstrap-token-tenant-job.yaml). The sim plays those Jobs
// and cert-manager here until the chart itself runs.
const (
	talosVersion        = "v1.13.6"                                                          // values.yaml:293
	talosSchematicID    = "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515" // values.yaml:294
	talosInstallerRepo  = "factory.talos.dev/installer"                                      // values.yaml:296
	mgmtClusterDomain   = "cozy.local"                                                       // packages/core/platform values.yaml clusterDomain
	tenantClusterDomain = "cluster.local"                                                    // _helpers.tpl:64-66
)

// TalosSecretsName, TalosCAName, KamajiCAName: the Secrets the talos-reconcile Job reads.
func TalosSecretsName(release string) string { return release + "-talos-secrets" }
func TalosCAName(release string) string      { return release + "-talos-ca" }
func KamajiCAName(release string) string     { return release + "-ca" }

// talosSecrets are the random values of <release>-talos-secrets.
type talosSecrets struct {
	Token, ClusterID, ClusterSecret, BootstrapTokenID, BootstrapTokenSecret string
}

func (s talosSecrets) bootstrapToken() string {
	return s.BootstrapTokenID + "." + s.BootstrapTokenSecret
}

// TalosInputs are what the talos-reconcile Job waits for, base64 as it reads them: the
// apiserver Service's ClusterIP, the Talos CA, Kamaji's cluster CA, the management CoreDNS
// ClusterIP, and the release's Talos secrets.
type TalosInputs struct {
	ServiceIP, TalosCA, K8sCA, CoreDNSIP string
	Secrets                              talosSecrets
}

// ensureTalosSecrets writes <release>-talos-secrets as talos-secrets.yaml renders it: reused
// when it exists (lookup), else token <6>.<16> and the cluster id and secret of 32 random
// alphanumerics, and a bootstrap token <6>.<16> in lowercase alphanumerics. The chart renders it
// without helm.sh/resource-policy: keep (cozystack v1.6.1 packages/apps/kubernetes/templates/
// talos/talos-secrets.yaml), so the release's uninstall deletes it: a new one is owned by
// release, the HelmRelease (nil: only read an existing one).
func (p *Platform) ensureTalosSecrets(ctx context.Context, app App, release *unstructured.Unstructured) (talosSecrets, error) {
	name := TalosSecretsName(Release(app.Name))
	var sec corev1.Secret
	err := p.r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: name}, &sec)
	if err == nil {
		d := sec.Data
		return talosSecrets{Token: string(d["token"]), ClusterID: string(d["clusterId"]), ClusterSecret: string(d["clusterSecret"]),
			BootstrapTokenID: string(d["bootstrapTokenId"]), BootstrapTokenSecret: string(d["bootstrapTokenSecret"])}, nil
	}
	if !apierrors.IsNotFound(err) {
		return talosSecrets{}, err
	}
	s := talosSecrets{
		Token:     strings.ToLower(randAlphaNum(6)) + "." + strings.ToLower(randAlphaNum(16)),
		ClusterID: randAlphaNum(32), ClusterSecret: randAlphaNum(32),
		BootstrapTokenID: strings.ToLower(randAlphaNum(6)), BootstrapTokenSecret: strings.ToLower(randAlphaNum(16)),
	}
	if release == nil {
		return talosSecrets{}, fmt.Errorf("platform: Secret %s/%s: not rendered yet", app.Namespace, name)
	}
	sec = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: name, Labels: (&renderer{app: app, release: Release(app.Name)}).labels()},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{"token": []byte(s.Token), "clusterId": []byte(s.ClusterID), "clusterSecret": []byte(s.ClusterSecret),
			"bootstrapToken": []byte(s.bootstrapToken()), "bootstrapTokenId": []byte(s.BootstrapTokenID), "bootstrapTokenSecret": []byte(s.BootstrapTokenSecret)},
	}
	if err := controllerutil.SetOwnerReference(release, &sec, p.c.Scheme()); err != nil {
		return talosSecrets{}, fmt.Errorf("platform: Secret %s/%s owned by %s: %w", app.Namespace, name, release.GetName(), err)
	}
	if err := p.c.Create(ctx, &sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return talosSecrets{}, fmt.Errorf("platform: Secret %s/%s: %w", app.Namespace, name, err)
	}
	return s, nil
}

// ensureTalosCA writes <release>-talos-ca as cert-manager issues the chart's self-signed CA
// Certificate into it (a kubernetes.io/tls Secret with ca.crt).
func (p *Platform) ensureTalosCA(ctx context.Context, app App) error {
	name := TalosCAName(Release(app.Name))
	err := p.r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: name}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	ca, err := controlplane.NewCA("talos")
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return err
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: name, Annotations: map[string]string{"cert-manager.io/certificate-name": name}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: key, "ca.crt": ca.CertPEM},
	}
	if err := p.c.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("platform: Secret %s/%s: %w", app.Namespace, name, err)
	}
	return nil
}

// talosInputs reads what the talos-reconcile Job waits for; nil while one is missing.
func (p *Platform) talosInputs(ctx context.Context, app App, secrets talosSecrets) (*TalosInputs, error) {
	release := Release(app.Name)
	in := &TalosInputs{Secrets: secrets}
	var svc, dns corev1.Service
	var talosCA, k8sCA corev1.Secret
	reads := []struct {
		key client.ObjectKey
		obj client.Object
	}{
		{client.ObjectKey{Namespace: app.Namespace, Name: release}, &svc},
		{client.ObjectKey{Namespace: app.Namespace, Name: TalosCAName(release)}, &talosCA},
		{client.ObjectKey{Namespace: app.Namespace, Name: KamajiCAName(release)}, &k8sCA},
		{client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}, &dns},
	}
	for _, r := range reads {
		if err := p.r.Get(ctx, r.key, r.obj); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
	}
	in.ServiceIP, in.CoreDNSIP = svc.Spec.ClusterIP, dns.Spec.ClusterIP
	in.TalosCA = base64.StdEncoding.EncodeToString(talosCA.Data[corev1.TLSCertKey])
	in.K8sCA = base64.StdEncoding.EncodeToString(k8sCA.Data["ca.crt"])
	if in.ServiceIP == "" || in.CoreDNSIP == "" || len(talosCA.Data[corev1.TLSCertKey]) == 0 || len(k8sCA.Data["ca.crt"]) == 0 {
		return nil, nil
	}
	return in, nil
}

// talosWorkerConfig is the worker machine configuration the talos-reconcile Job applies as the
// TalosConfigTemplate's data (generateType none), field for field as its heredoc writes it
// (talos-reconcile-job.yaml:286-404), with the node group's kubelet reservations computed as the
// chart computes them (lines 467-500). token is the bootstrap token the worker's kubelet
// presents (cluster.token).
func talosWorkerConfig(in *TalosInputs, release, namespace, kubelet string, spec map[string]any, token string) string {
	sysCPU, sysMem := reservations(spec)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("version: v1alpha1")
	w("persist: true")
	w("machine:")
	w("  type: worker")
	w("  token: %s", in.Secrets.Token)
	w("  network:")
	w("    nameservers:")
	w("      - %s", in.CoreDNSIP)
	w("    searchDomains:")
	w("      - svc.%s", mgmtClusterDomain)
	w("      - %s", mgmtClusterDomain)
	w("      - svc.cluster.local")
	w("      - cluster.local")
	w("    extraHostEntries:")
	w("      - ip: %s", in.ServiceIP)
	w("        aliases:")
	w("          - %s.%s.svc", release, namespace)
	w("          - %s.%s.svc.%s", release, namespace, tenantClusterDomain)
	w("  ca:")
	w("    crt: %s", in.TalosCA)
	w("  kubelet:")
	w("    image: ghcr.io/siderolabs/kubelet:%s", kubelet)
	w("    extraConfig:")
	w("      systemReserved:")
	w("        cpu: %q", sysCPU)
	w("        memory: %q", sysMem)
	w("      kubeReserved:")
	w("        cpu: %q", sysCPU)
	w("        memory: %q", sysMem)
	w("      evictionHard:")
	w("        memory.available: \"7%%\"")
	w("        nodefs.available: \"10%%\"")
	w("        imagefs.available: \"15%%\"")
	w("        nodefs.inodesFree: \"5%%\"")
	w("      evictionSoft:")
	w("        memory.available: \"10%%\"")
	w("        nodefs.available: \"15%%\"")
	w("        imagefs.available: \"20%%\"")
	w("      evictionSoftGracePeriod:")
	w("        memory.available: \"1m30s\"")
	w("        nodefs.available: \"1m30s\"")
	w("        imagefs.available: \"1m30s\"")
	w("      evictionMinimumReclaim:")
	w("        memory.available: \"256Mi\"")
	w("  install:")
	w("    disk: /dev/vda")
	w("    image: %s/%s:%s", talosInstallerRepo, talosSchematicID, talosVersion)
	w("    wipe: false")
	w("  features:")
	w("    rbac: true")
	w("    kubePrism:")
	w("      enabled: false")
	w("cluster:")
	w("  id: %s", in.Secrets.ClusterID)
	w("  secret: %s", in.Secrets.ClusterSecret)
	w("  controlPlane:")
	w("    endpoint: https://%s.%s.svc:6443", release, namespace)
	w("  clusterName: %s", release)
	w("  network:")
	w("    dnsDomain: %s", tenantClusterDomain)
	w("    podSubnets:")
	w("      - %s", PodCIDR)
	w("    serviceSubnets:")
	w("      - %s", ServiceCIDR)
	w("  token: %s", token)
	w("  ca:")
	w("    crt: %s", in.K8sCA)
	w("  discovery:")
	w("    enabled: true")
	w("    registries:")
	w("      kubernetes:")
	w("        disabled: true")
	w("      service:")
	w("        disabled: true")
	return b.String()
}

// reservations are the chart's auto-computed kubelet reservations for a node group (the same for
// system and kube): 5% of its memory clamped to [256Mi, 1Gi] and 5% of its CPU clamped to
// [50m, 500m], from resources (an instance type's guest sizes otherwise, which the sim does not
// look up: the defaults then apply).
func reservations(spec map[string]any) (cpu, memory string) {
	mi, milli := int64(256), int64(50)
	res, _ := spec["resources"].(map[string]any)
	if q, err := resource.ParseQuantity(fmt.Sprint(res["memory"])); err == nil && res["memory"] != nil {
		mi = min(max(q.Value()/(1<<20)*5/100, 256), 1024)
	}
	if q, err := resource.ParseQuantity(fmt.Sprint(res["cpu"])); err == nil && res["cpu"] != nil {
		milli = min(max(q.MilliValue()*5/100, 50), 500)
	}
	return fmt.Sprintf("%dm", milli), fmt.Sprintf("%dMi", mi)
}

func randAlphaNum(n int) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(letters))))
		b[i] = letters[k.Int64()]
	}
	return string(b)
}
