package install

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// tenantChart plays the platform's tenant chart for tenant-root: once Tenant root has
// spec.etcd true, it renders HelmRelease tenant-root/etcd (packages/apps/tenant/templates/
// etcd.yaml:1-5), which goes Ready, and the etcd chart's DataStore tenant-root
// (packages/extra/etcd/templates/datastore.yaml:1-9). Before that it renders neither.
func (e *env) tenantChart(ctx context.Context) {
	go func() {
		for ctx.Err() == nil {
			root, err := e.dyn.Resource(gvrTenant).Namespace("tenant-root").Get(ctx, "root", metav1.GetOptions{})
			if on, _, _ := unstructured.NestedBool(root.Object, "spec", "etcd"); err == nil && on {
				hr := obj("helm.toolkit.fluxcd.io/v2", "HelmRelease", "tenant-root", "etcd")
				hr.Object["spec"] = map[string]any{"chart": map[string]any{"spec": map[string]any{"chart": "etcd"}}}
				if hr, err = e.dyn.Resource(gvrHelmRelease).Namespace("tenant-root").Create(ctx, hr, metav1.CreateOptions{}); err == nil {
					time.Sleep(300 * time.Millisecond)
					hr.Object["status"] = hrStatus("True", "InstallSucceeded", "Helm install succeeded for release tenant-root/etcd.v1", "deployed")
					_, _ = e.dyn.Resource(gvrHelmRelease).Namespace("tenant-root").UpdateStatus(ctx, hr, metav1.UpdateOptions{})
					ds := obj("kamaji.clastix.io/v1alpha1", "DataStore", "", "tenant-root")
					ds.Object["spec"] = map[string]any{"driver": "etcd", "endpoints": []any{"etcd.tenant-root.svc:2379"}}
					_, _ = e.dyn.Resource(gvrDataStore).Create(ctx, ds, metav1.CreateOptions{})
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

func (e *env) rootTenant(etcd bool) {
	e.t.Helper()
	e.namespace("tenant-root")
	root := obj("apps.cozystack.io/v1alpha1", "Tenant", "tenant-root", "root")
	root.Object["spec"] = map[string]any{"host": "example.org", "etcd": etcd, "isolated": true}
	e.create(gvrTenant, root)
}

// The platform phase gives the root tenant its etcd as Cozystack's own e2e does: Tenant
// tenant-root/root gets spec.etcd true, and the gate waits for HelmRelease tenant-root/etcd
// Ready and the DataStore tenant-root. Without the patch no etcd HelmRelease appears and the
// wait says so.
func TestRootTenantGetsItsEtcd(t *testing.T) {
	e := newEnv(t)
	e.crds([]string{"tenants.apps.cozystack.io", "helmreleases.helm.toolkit.fluxcd.io"}, "kamaji.clastix.io.yaml")
	e.rootTenant(false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.tenantChart(ctx)

	// A cluster the harness did not install is judged, not changed.
	err := RootEtcd(testkit.Context(t, 10*time.Second), e.dyn, true, GateOptions{})
	var ce *substrate.ConfigurationError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "Tenant tenant-root/root has spec.etcd false") {
		t.Fatalf("gates only: %v", err)
	}

	var rec strings.Builder
	if err := RootEtcd(testkit.Context(t, 30*time.Second), e.dyn, false, GateOptions{Record: &rec}); err != nil {
		t.Fatal(err)
	}
	root, err := e.dyn.Resource(gvrTenant).Namespace("tenant-root").Get(testkit.Context(t, 5*time.Second), "root", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if on, _, _ := unstructured.NestedBool(root.Object, "spec", "etcd"); !on {
		t.Fatalf("spec.etcd not set: %v", root.Object["spec"])
	}
	if host, _, _ := unstructured.NestedString(root.Object, "spec", "host"); host != "example.org" {
		t.Fatalf("the patch touched more than spec.etcd: %v", root.Object["spec"])
	}
	if !strings.Contains(rec.String(), "HelmRelease tenant-root/etcd Ready, DataStore tenant-root") {
		t.Fatalf("record %q", rec.String())
	}
	// Judged again on the same cluster (E2E_REUSE, the existing substrate): nothing to change.
	if err := RootEtcd(testkit.Context(t, 10*time.Second), e.dyn, true, GateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// If the etcd HelmRelease never appears, the wait ends at the deadline saying so.
func TestRootTenantEtcdThatNeverComesIsNamed(t *testing.T) {
	e := newEnv(t)
	e.crds([]string{"tenants.apps.cozystack.io", "helmreleases.helm.toolkit.fluxcd.io"}, "kamaji.clastix.io.yaml")
	e.rootTenant(false)
	err := RootEtcd(testkit.Context(t, 3*time.Second), e.dyn, false, GateOptions{})
	var stuck *StuckError
	if !errors.As(err, &stuck) || !strings.Contains(err.Error(), "HelmRelease tenant-root/etcd not created yet") {
		t.Fatalf("want stuck at the etcd HelmRelease, got %v", err)
	}
}
