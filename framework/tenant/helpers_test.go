package tenant_test

import (
	"context"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/tenant/tenanttest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

func equal(a, b any) bool {
	if ab, ok := a.([]any); ok {
		bb, ok := b.([]any)
		if !ok || len(ab) != len(bb) {
			return false
		}
		for i := range ab {
			if !equal(ab[i], bb[i]) {
				return false
			}
		}
		return true
	}
	if am, ok := a.(map[string]any); ok {
		bm, ok := b.(map[string]any)
		if !ok || len(am) != len(bm) {
			return false
		}
		for k := range am {
			if !equal(am[k], bm[k]) {
				return false
			}
		}
		return true
	}
	return a == b
}

type stringer string

func (s stringer) String() string { return string(s) }

func mustNamespace(t *testing.T, env *tenanttest.Env, ns string) {
	t.Helper()
	if err := env.Cluster.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
}

func createHelmRelease(t *testing.T, env *tenanttest.Env, names tenant.Names, status, reason, msg string) {
	t.Helper()
	hr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"releaseName": names.Release()}}}
	hr.SetGroupVersionKind(tenant.HelmReleaseGVK)
	hr.SetNamespace(names.Namespace)
	hr.SetName(names.HelmRelease())
	if err := env.Cluster.Client.Create(context.Background(), hr); err != nil {
		t.Fatal(err)
	}
	if status != "" {
		setHelmReleaseReady(t, env, names, status, reason, msg)
	}
}

func setHelmReleaseReady(t *testing.T, env *tenanttest.Env, names tenant.Names, status, reason, msg string) {
	t.Helper()
	setStatus(t, env, tenant.HelmReleaseGVK, names.Namespace, names.HelmRelease(), map[string]any{
		"conditions": []any{cond(status, reason, msg)}})
}

// setTCPVersionStatus is Kamaji's status.kubernetesResources.version.status of the cluster's
// TenantControlPlane.
func setTCPVersionStatus(t *testing.T, env *tenanttest.Env, names tenant.Names, status string) {
	t.Helper()
	setStatus(t, env, tenant.TenantControlPlaneGVK, names.Namespace, names.ControlPlane(), map[string]any{
		"kubernetesResources": map[string]any{"version": map[string]any{"status": status, "version": "v1.35.4"}}})
}

// setHelmReleaseStatus is Flux's status after attempting generation attempted.
func setHelmReleaseStatus(t *testing.T, env *tenanttest.Env, names tenant.Names, attempted int64, status, reason, msg string) {
	t.Helper()
	setStatus(t, env, tenant.HelmReleaseGVK, names.Namespace, names.HelmRelease(), map[string]any{
		"lastAttemptedGeneration": attempted, "observedGeneration": attempted, "conditions": []any{cond(status, reason, msg)}})
}

func cond(status, reason, msg string) map[string]any {
	return map[string]any{"type": "Ready", "status": status, "reason": reason, "message": msg,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

func setStatus(t *testing.T, env *tenanttest.Env, gvk interface{ String() string }, ns, name string, status map[string]any) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	switch gvk.String() {
	case tenant.HelmReleaseGVK.String():
		u.SetGroupVersionKind(tenant.HelmReleaseGVK)
	case tenant.TenantControlPlaneGVK.String():
		u.SetGroupVersionKind(tenant.TenantControlPlaneGVK)
	default:
		u.SetGroupVersionKind(tenant.KubernetesGVK)
	}
	if err := env.Cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = status
	if err := env.Cluster.Client.Status().Update(ctx, u); err != nil {
		t.Fatal(err)
	}
}

// kubeconfigFor is a kubeconfig of the test apiserver's admin, as Kamaji would write one.
func kubeconfigFor(t *testing.T, env *tenanttest.Env) []byte {
	t.Helper()
	cfg := env.API.Admin()
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

// A pool written back after a refusal loses the field the refusal added: the merge patch
// nulls what mutate removed, and touches no other pool.
