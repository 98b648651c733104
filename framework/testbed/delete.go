package testbed

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// AppKinds are what a Kubernetes app is made of on the management cluster, by kind: its
// Cluster API objects and the providers', its KubeVirt VMs and VMIs, DataVolumes and PVCs,
// Secrets and Services (the control plane's LoadBalancer among them) and its HelmRelease.
// Each is the app's when named R or R-<anything> (R = kubernetes-<app>) or labelled with its
// Cluster API cluster name.
var AppKinds = []schema.GroupVersionKind{
	tenant.HelmReleaseGVK,
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"},
	MachineDeployGVK, MachineSetGVK, MachineGVK, MachineHealthGVK,
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtCluster"},
	tenant.KubevirtMachineGVK, tenant.KubevirtMachineTemplateGVK,
	{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KamajiControlPlane"},
	{Group: "kamaji.clastix.io", Version: "v1alpha1", Kind: "TenantControlPlane"},
	{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha3", Kind: "TalosConfigTemplate"},
	{Group: "bootstrap.cluster.x-k8s.io", Version: "v1alpha3", Kind: "TalosConfig"},
	{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KairosConfigTemplate"},
	{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KairosConfig"},
	VirtualMachineGVK, VMIGVK, DataVolumeGVK, PVCGVK, SecretGVK,
	{Group: "", Version: "v1", Kind: "Service"},
}

// NamespaceGVK is the Namespace kind.
var NamespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}

// Served are the kinds of kinds the management cluster serves; a kind a lane's platform does
// not install (no Kairos provider, say) has nothing to leave.
func (t *Tenant) Served(kinds []schema.GroupVersionKind) []schema.GroupVersionKind {
	mapper := t.o.Management.Client.RESTMapper()
	var out []schema.GroupVersionKind
	for _, k := range kinds {
		if _, err := mapper.RESTMapping(k.GroupKind(), k.Version); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// OfApp says whether obj belongs to the Kubernetes app of names (see AppKinds).
func OfApp(names tenant.Names) func(*unstructured.Unstructured) bool {
	r := names.Release()
	return func(o *unstructured.Unstructured) bool {
		n := o.GetName()
		return n == r || strings.HasPrefix(n, r+"-") || o.GetLabels()[tenant.LabelClusterName] == r
	}
}

// DeleteApp deletes the Kubernetes app of names; Teardown no longer does.
func (t *Tenant) DeleteApp(ctx context.Context, names tenant.Names) error {
	if err := t.Platform.DeleteApp(ctx, names); err != nil {
		return err
	}
	t.forgetCluster(names)
	return nil
}

// DeleteTenant deletes the run's Tenant app; Teardown no longer does.
func (t *Tenant) DeleteTenant(ctx context.Context) error {
	if err := t.Platform.DeleteTenant(ctx, t.o.Run); err != nil {
		return err
	}
	t.forgetTenant()
	return nil
}

// certificateNameAnnotation is what cert-manager writes on the Secret it issues for a
// Certificate (cert-manager.io/certificate-name).
const certificateNameAnnotation = "cert-manager.io/certificate-name"

// LeftByDefault says why obj outlives the deletion of its app by a component's default, ""
// when it does not. cert-manager keeps the Secret it issued when the Certificate is deleted
// unless it runs with --enable-certificate-owner-ref or the Certificate asks for an owner
// reference (cert-manager/cert-manager design/20220720-per-certificate-owner-ref.md);
// Cozystack v1.6.1 runs it without (packages/system/cert-manager/charts/cert-manager/
// values.yaml:268, templates/deployment.yaml:138-139) and the Kubernetes chart's Talos
// Certificates ask for none (packages/apps/kubernetes/templates/talos/talos-pki.yaml:26-64),
// so an app's <release>-talos-ca and <release>-talos-tls-cert stay until the tenant namespace
// goes. Such an object is a known leak of the platform: reported, and held to the tenant's
// deletion instead.
func LeftByDefault(obj *unstructured.Unstructured) string {
	if obj.GetKind() != "Secret" || obj.GetAnnotations()[certificateNameAnnotation] == "" || len(obj.GetOwnerReferences()) > 0 {
		return ""
	}
	return "cert-manager keeps the Secret of Certificate " + obj.GetAnnotations()[certificateNameAnnotation] +
		" (no --enable-certificate-owner-ref in Cozystack's cert-manager, no certificateOwnerRef in the chart)"
}
