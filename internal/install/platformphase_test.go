package install

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The platform phase as a run calls it, against a local apiserver holding the platform's
// shapes: the Packages of the graph at main without the lanes' disabled set, reconciled by the
// stand-in of the operator's dependency behaviour into HelmReleases that go Ready, the
// built-in NodeGroupClasses, the platform's APIs, and the root Tenant without etcd. The phase
// passes only once it has given the root tenant its etcd and seen its HelmRelease and DataStore.
func TestPlatformPhaseEnablesTheRootTenantsEtcd(t *testing.T) {
	e := newEnv(t)
	e.crds([]string{"helmreleases.helm.toolkit.fluxcd.io", "nodegroupclasses.cozystack.io", "tenants.apps.cozystack.io"},
		"packages.cozystack.io.yaml", "kamaji.clastix.io.yaml")
	l := testLane(t)
	e.startOperator()
	e.platformChart(graphAt(t, "main"), l.Platform.DisabledNames())
	for _, os := range builtinClasses() {
		c := obj("cozystack.io/v1alpha1", "NodeGroupClass", "", os)
		c.Object["spec"] = map[string]any{"os": os}
		e.create(gvrNodeClass, c)
	}
	for _, name := range platformAPIServices() {
		// A CRD of the group registers its APIService itself (tenants.apps.cozystack.io here).
		if _, err := e.dyn.Resource(gvrAPIService).Get(testkit.Context(t, 5*time.Second), name, metav1.GetOptions{}); err == nil {
			continue
		}
		s := obj("apiregistration.k8s.io/v1", "APIService", "", name)
		s.Object["spec"] = map[string]any{"group": strings.TrimPrefix(name, "v1alpha1."), "version": "v1alpha1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15)}
		e.create(gvrAPIService, s)
	}
	e.rootTenant(false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.tenantChart(ctx)

	var rec strings.Builder
	o := Options{Lane: l}
	o.Record = &rec
	if err := Platform(testkit.Context(t, 90*time.Second), e.c, o); err != nil {
		t.Fatalf("%v\n%s", err, rec.String())
	}
	root, err := e.dyn.Resource(gvrTenant).Namespace("tenant-root").Get(testkit.Context(t, 5*time.Second), "root", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if on, _, _ := unstructured.NestedBool(root.Object, "spec", "etcd"); !on {
		t.Fatal("the platform phase passed without the root tenant's etcd")
	}
	for _, want := range []string{"ok     platform ", "ok     root-etcd "} {
		if !strings.Contains(rec.String(), want) {
			t.Errorf("gates.txt lacks %q:\n%s", want, rec.String())
		}
	}
}
