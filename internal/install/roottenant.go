package install

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

var (
	gvrTenant    = schema.GroupVersionResource{Group: "apps.cozystack.io", Version: "v1alpha1", Resource: "tenants"}
	gvrDataStore = schema.GroupVersionResource{Group: "kamaji.clastix.io", Version: "v1alpha1", Resource: "datastores"}
)

// RootEtcd gives the root tenant its etcd, as Cozystack's own e2e does before any tenant
// cluster (hack/e2e-install-cozystack.bats:315 at main: spec.etcd true on tenants/root), and
// waits for what the tenant clusters need of it: the HelmRelease tenant-root/etcd Ready
// (l.328-329) and the Kamaji DataStore tenant-root the etcd chart creates
// (packages/extra/etcd/templates/datastore.yaml:1-9). Without it a tenant cluster under
// tenant-root names a DataStore that does not exist (templates/cluster.yaml:422), and
// tenant-root's own values (cozystack-values-secret.yaml:15-17) make no awaiting-etcd beacon
// to say so.
//
// With gatesOnly (a cluster the harness did not install) nothing is changed: a root tenant
// without etcd is a configuration failure saying how to enable it.
func RootEtcd(ctx context.Context, dyn dynamic.Interface, gatesOnly bool, o GateOptions) error {
	ns, name := assumptions.RootTenantNamespace, assumptions.RootTenant
	if err := Present(ctx, dyn, Watch{GVR: gvrTenant, Namespace: ns}, "root Tenant app", []string{name}, o); err != nil {
		return fmt.Errorf("root tenant etcd: %w", err)
	}
	root, err := dyn.Resource(gvrTenant).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("root tenant etcd: %w", err)
	}
	if on, _, _ := unstructured.NestedBool(root.Object, "spec", "etcd"); !on {
		if gatesOnly {
			return &substrate.ConfigurationError{Err: fmt.Errorf(
				"root tenant etcd: Tenant %s/%s has spec.etcd false, so tenant clusters under it have no DataStore; enable it: kubectl patch tenants/%s -n %s --type merge -p '{\"spec\":{\"etcd\":true}}'",
				ns, name, name, ns)}
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"etcd": true}})
		if _, err := dyn.Resource(gvrTenant).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldOwner}); err != nil {
			return fmt.Errorf("root tenant etcd: patch Tenant %s/%s spec.etcd true: %w", ns, name, err)
		}
		logf(o.Log, "root tenant: Tenant %s/%s spec.etcd set to true", ns, name)
	}
	release := assumptions.RootEtcdRelease
	err = Wait(ctx, dyn, Watch{GVR: gvrHelmRelease, Namespace: ns}, "HelmRelease "+ns+"/"+release+" Ready (the root tenant's etcd)", o.Log,
		func(objs []*unstructured.Unstructured) (bool, string, error) {
			hr := index(objs)[release]
			if hr == nil {
				return false, "HelmRelease " + ns + "/" + release + " not created yet (the tenant chart renders it once spec.etcd is true)", nil
			}
			nr := HelmReleasesNotReady([]*unstructured.Unstructured{hr})
			if len(nr) == 0 {
				return true, "", nil
			}
			return false, nr[0].String(), nil
		})
	if err != nil {
		return fmt.Errorf("root tenant etcd: %w", err)
	}
	if err := Present(ctx, dyn, Watch{GVR: gvrDataStore}, "Kamaji DataStore", []string{assumptions.RootDataStore}, o); err != nil {
		return fmt.Errorf("root tenant etcd: %w", err)
	}
	if o.Record != nil {
		fmt.Fprintf(o.Record, "ok     %-24s Tenant %s/%s spec.etcd true, HelmRelease %s/%s Ready, DataStore %s\n", "root-etcd", ns, name, ns, release, assumptions.RootDataStore)
	}
	return nil
}
