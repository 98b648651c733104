package tenantenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// Namespace creates namespace ns.
func (e *Env) Namespace(t testing.TB, ns string) {
	t.Helper()
	if err := e.Cluster.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
}

// HelmRelease creates the HelmRelease of app names, as the platform does for a Kubernetes
// app, with a Ready condition of status, reason and msg unless status is "".
func (e *Env) HelmRelease(t testing.TB, names tenant.Names, status, reason, msg string) {
	t.Helper()
	hr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"releaseName": names.Release()}}}
	hr.SetGroupVersionKind(tenant.HelmReleaseGVK)
	hr.SetNamespace(names.Namespace)
	hr.SetName(names.HelmRelease())
	if err := e.Cluster.Client.Create(context.Background(), hr); err != nil {
		t.Fatal(err)
	}
	if status != "" {
		e.SetHelmReleaseReady(t, names, status, reason, msg)
	}
}

// SetHelmReleaseReady sets the Ready condition of app names' HelmRelease, and nothing else.
func (e *Env) SetHelmReleaseReady(t testing.TB, names tenant.Names, status, reason, msg string) {
	t.Helper()
	e.SetStatus(t, tenant.HelmReleaseGVK, names.Namespace, names.HelmRelease(), map[string]any{
		"conditions": []any{Ready(status, reason, msg)}})
}

// SetHelmReleaseStatus is Flux's status of app names' HelmRelease after attempting generation
// attempted.
func (e *Env) SetHelmReleaseStatus(t testing.TB, names tenant.Names, attempted int64, status, reason, msg string) {
	t.Helper()
	e.SetStatus(t, tenant.HelmReleaseGVK, names.Namespace, names.HelmRelease(), map[string]any{
		"lastAttemptedGeneration": attempted, "observedGeneration": attempted, "conditions": []any{Ready(status, reason, msg)}})
}

// SetControlPlaneStatus is Kamaji's status.kubernetesResources.version.status of app names'
// TenantControlPlane.
func (e *Env) SetControlPlaneStatus(t testing.TB, names tenant.Names, status string) {
	t.Helper()
	e.SetStatus(t, tenant.TenantControlPlaneGVK, names.Namespace, names.ControlPlane(), map[string]any{
		"kubernetesResources": map[string]any{"version": map[string]any{"status": status, "version": "v1.35.4"}}})
}

// ControlPlane is what Kamaji writes for app names' control plane: the admin kubeconfig Secret
// (of this apiserver's admin, so the tenant cluster is this one) and a TenantControlPlane whose
// version status is status ("Ready" once its control plane runs).
func (e *Env) ControlPlane(t testing.TB, names tenant.Names, status string) {
	t.Helper()
	ctx := context.Background()
	sk := names.AdminKubeconfig()
	if err := e.Cluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sk.Namespace, Name: sk.Name},
		Data: map[string][]byte{sk.Key: e.AdminKubeconfig(t)}}); err != nil {
		t.Fatal(err)
	}
	tcp := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	tcp.SetGroupVersionKind(tenant.TenantControlPlaneGVK)
	tcp.SetNamespace(names.Namespace)
	tcp.SetName(names.ControlPlane())
	if err := e.Cluster.Client.Create(ctx, tcp); err != nil {
		t.Fatal(err)
	}
	e.SetControlPlaneStatus(t, names, status)
}

// Ready is a Ready condition as Flux writes it.
func Ready(status, reason, msg string) map[string]any {
	return map[string]any{"type": "Ready", "status": status, "reason": reason, "message": msg,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

// SetStatus replaces the status of object ns/name of kind gvk.
func (e *Env) SetStatus(t testing.TB, gvk schema.GroupVersionKind, ns, name string, status map[string]any) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := e.Cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = status
	if err := e.Cluster.Client.Status().Update(ctx, u); err != nil {
		t.Fatal(err)
	}
}

// AdminKubeconfig is a kubeconfig of this apiserver's admin, as Kamaji would write one.
func (e *Env) AdminKubeconfig(t testing.TB) []byte {
	t.Helper()
	cfg := e.API.Admin()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
