package tenant_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/testkit"
	"github.com/cozystack/cozy-e2e/internal/testkit/tenantenv"
)

// One apiserver for every test of the package: starting one costs seconds, and each test
// works in namespaces and names of its own.
func TestPlatform(t *testing.T) {
	env := tenantenv.Start(t)
	for name, f := range map[string]func(*testing.T, *tenantenv.Env){
		"AppsAndClassesAreStoredAsBuilt":                 testAppsAndClassesAreStoredAsBuilt,
		"AClassWithAnotherSpecIsNamed":                   testAClassWithAnotherSpecIsNamed,
		"WaitControlPlaneReturnsTheTenantCluster":        testWaitControlPlaneReturnsTheTenantCluster,
		"WaitControlPlaneEndsOnARefusalAndOnTheDeadline": testWaitControlPlaneEndsOnARefusalAndOnTheDeadline,
		"WaitControlPlaneEndsOnTheAwaitingEtcdBeacon":    testWaitControlPlaneEndsOnTheAwaitingEtcdBeacon,
		"WaitRenderedWaitsForTheGenerationItWrote":       testWaitRenderedWaitsForTheGenerationItWrote,
		"WaitRenderedWaitsForTheRestOfFluxsStatus":       testWaitRenderedWaitsForTheRestOfFluxsStatus,
		"UpdatePoolWritesBackWhatItChanged":              testUpdatePoolWritesBackWhatItChanged,
		"ReleaseHistoryFollowsThePolicy":                 testReleaseHistoryFollowsThePolicy,
		"TheInstalledPlatformSaysTheVersionsItOffers":    testTheInstalledPlatformSaysTheVersionsItOffers,
	} {
		t.Run(name, func(t *testing.T) { f(t, env) })
	}
}

func testLane() *lane.Lane {
	return &lane.Lane{File: "lanes/test.yaml", Kubernetes: lane.Kubernetes{Version: "v1.35", Patch: "v1.35.4"},
		Classes: []lane.Class{{Name: "acme-kairos", OS: "kairos",
			Image:             "registry.example.invalid/acme/kairos@sha256:" + strings.Repeat("0", 63) + "1",
			KubernetesVersion: "v1.35.4"}},
		Pools: []lane.Pool{{Name: "md0", Class: "talos", Replicas: 2}, {Name: "kairos", Class: "kairos", Replicas: 1},
			{Name: "acme", Class: "acme-kairos", Replicas: 1, LogSerialConsole: true}}}
}

// The builders write what the platform's schemas accept: nothing is pruned on the way in.
func testAppsAndClassesAreStoredAsBuilt(t *testing.T, env *tenantenv.Env) {
	ctx := testkit.Context(t, time.Minute)
	c := env.Cluster.Client
	run, _ := tenant.NewRun("ab12")
	for _, ns := range []string{tenant.RootNamespace, run.Namespace()} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, tenant.TenantApp(run)); err != nil {
		t.Fatal(err)
	}
	l := testLane()
	pools := append(l.Pools, lane.Pool{Name: "bad", Class: "kairos"})
	names := run.Cluster("pools")
	built := tenant.KubernetesApp(tenant.ClusterSpec{Names: names, Version: "v1.35", Pools: pools})
	// Fields a Kairos pool must refuse, as the refusal specs write them.
	bad := built.Object["spec"].(map[string]any)["nodeGroups"].(map[string]any)["bad"].(map[string]any)
	bad["osImage"], bad["kernelModules"], bad["gpus"] = "x", []any{"drbd"}, []any{map[string]any{"name": "nvidia"}}
	if err := c.Create(ctx, built); err != nil {
		t.Fatal(err)
	}
	created, err := tenant.Platform{Mgmt: env.Cluster}.EnsureClasses(ctx, l)
	if err != nil || len(created) != 1 {
		t.Fatalf("created %v, %v", created, err)
	}
	// A second run finds the class as it would make it and uses it.
	if again, err := (tenant.Platform{Mgmt: env.Cluster}).EnsureClasses(ctx, l); err != nil || len(again) != 0 {
		t.Fatalf("second EnsureClasses: %v %v", again, err)
	}
	app, err := tenant.Platform{Mgmt: env.Cluster}.Get(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"spec.version":                                          "v1.35",
		"spec.nodeGroups.md0.nodeGroupClassName":                "talos",
		"spec.nodeGroups.md0.minReplicas":                       int64(2),
		"spec.nodeGroups.md0.maxReplicas":                       int64(2),
		"spec.nodeGroups.md0.logSerialConsole":                  false,
		"spec.nodeGroups.acme.nodeGroupClassName":               "acme-kairos",
		"spec.nodeGroups.bad.osImage":                           "x",
		"spec.nodeGroups.bad.kernelModules":                     []any{"drbd"},
		"spec.nodeGroups.bad.gpus":                              []any{map[string]any{"name": "nvidia"}},
		"spec.controlPlane.replicas":                            int64(2),
		"spec.nodeGroups.kairos.resources.memory":               "4Gi",
		"spec.addons.ingressNginx.enabled":                      false,
		"spec.nodeGroups.kairos.maxReplicas":                    int64(1),
		"spec.nodeGroups.acme.logSerialConsole":                 true,
		"spec.nodeGroups.kairos.nodeGroupClassName":             "kairos",
		"spec.nodeGroups.md0.instanceType":                      "u1.medium",
		"spec.nodeGroups.md0.podCpuRequest":                     "100m",
		"spec.nodeGroups.md0.diskSize":                          "20Gi",
		"spec.nodeGroups.md0.roles":                             []any{"ingress-nginx"},
		"spec.nodeGroups.acme.minReplicas":                      int64(1),
		"spec.nodeGroups.kairos.podCpuLimit":                    "2",
		"spec.storageClass":                                     "replicated",
		"spec.controlPlane.apiServer.resourcesPreset":           "c1.medium",
		"spec.addons.monitoringAgents.enabled":                  false,
		"spec.nodeGroups.md0.resources.cpu":                     "1",
		"spec.nodeGroups.kairos.gpus":                           []any{},
		"spec.controlPlane.konnectivity.server.resourcesPreset": "micro",
	} {
		got, ok, err := unstructured.NestedFieldNoCopy(app.Object, strings.Split(path, ".")...)
		if !ok || err != nil || !equal(got, want) {
			t.Errorf("%s = %#v (found %v), want %#v", path, got, ok, want)
		}
	}
	class := &unstructured.Unstructured{}
	class.SetGroupVersionKind(tenant.NodeGroupClassGVK)
	if err := c.Get(ctx, types.NamespacedName{Name: "acme-kairos"}, class); err != nil {
		t.Fatal(err)
	}
	if img, _, _ := unstructured.NestedString(class.Object, "spec", "image"); img != l.Classes[0].Image {
		t.Errorf("class image %q", img)
	}
}

// A class of the lane's name with another spec is not silently reused.
func testAClassWithAnotherSpecIsNamed(t *testing.T, env *tenantenv.Env) {
	ctx := testkit.Context(t, time.Minute)
	l := testLane()
	l.Classes[0].Name = "beta-kairos"
	other := *l
	other.Classes = []lane.Class{{Name: "beta-kairos", OS: "kairos"}}
	if _, err := (tenant.Platform{Mgmt: env.Cluster}).EnsureClasses(ctx, &other); err != nil {
		t.Fatal(err)
	}
	_, err := tenant.Platform{Mgmt: env.Cluster}.EnsureClasses(ctx, l)
	if err == nil || !strings.Contains(err.Error(), "lanes/test.yaml: classes[0]: NodeGroupClass beta-kairos exists with spec") {
		t.Fatalf("%v", err)
	}
}

// The admin kubeconfig Secret alone does not end the control plane wait (Kamaji writes it before
// the control plane runs); the TenantControlPlane's Ready does, and the wait hands back a working
// client of the cluster the Secret names.
func testWaitControlPlaneReturnsTheTenantCluster(t *testing.T, env *tenantenv.Env) {
	ctx := testkit.Context(t, time.Minute)
	names := tenant.For("tenant-x", "t1")
	env.Namespace(t, names.Namespace)
	env.HelmRelease(t, names, "", "", "")
	done := make(chan error, 1)
	var got interface{ String() string }
	go func() {
		tc, err := tenant.Platform{Mgmt: env.Cluster}.WaitControlPlane(ctx, names)
		if tc != nil {
			got = stringer(tc.Name)
		}
		done <- err
	}()
	env.ControlPlane(t, names, "Provisioning")
	select {
	case err := <-done:
		t.Fatalf("the wait ended on a Secret and a Provisioning control plane: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	ready := time.Now()
	env.SetControlPlaneStatus(t, names, "Ready")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(ready); took > 2*time.Second {
		t.Errorf("the wait took %s after the TenantControlPlane turned Ready", took)
	}
	if got == nil || got.String() != "tenant kubernetes-t1" {
		t.Errorf("tenant cluster %v", got)
	}
}

// The chart's awaiting-etcd ConfigMap ends the wait at once as a configuration failure with its
// message: no control plane comes without a DataStore.
func testWaitControlPlaneEndsOnTheAwaitingEtcdBeacon(t *testing.T, env *tenantenv.Env) {
	ctx := testkit.Context(t, 30*time.Second)
	names := tenant.For("tenant-e", "t1")
	env.Namespace(t, names.Namespace)
	env.HelmRelease(t, names, "True", "InstallSucceeded", "Helm install succeeded")
	// As packages/apps/kubernetes/templates/cluster.yaml:226-244 renders it.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.Release() + "-awaiting-etcd",
		Labels: map[string]string{"app.kubernetes.io/name": "kubernetes", "app.kubernetes.io/instance": names.Release()}},
		Data: map[string]string{"status": "awaiting-etcd", "message": "No DataStore is available for this tenant Kubernetes cluster. The parent\nTenant application has not populated _namespace.etcd.\n"}}
	if err := env.Cluster.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := tenant.Platform{Mgmt: env.Cluster}.WaitControlPlane(ctx, names)
	var we *tenant.WaitError
	if !errors.As(err, &we) || we.Class != verdict.Configuration || !strings.Contains(we.Detail, "No DataStore is available for this tenant Kubernetes cluster. The parent Tenant application") ||
		!strings.Contains(we.Detail, names.Release()+"-awaiting-etcd") {
		t.Fatalf("%v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("judged after %s", took)
	}
}

func testWaitControlPlaneEndsOnARefusalAndOnTheDeadline(t *testing.T, env *tenantenv.Env) {
	names := tenant.For("tenant-y", "t1")
	env.Namespace(t, names.Namespace)
	env.HelmRelease(t, names, "False", "InstallFailed", "nodeGroups.kairos: gpus is not supported on a Kairos class")
	ctx := testkit.Context(t, 30*time.Second)
	_, err := tenant.Platform{Mgmt: env.Cluster}.WaitControlPlane(ctx, names)
	var we *tenant.WaitError
	if !errors.As(err, &we) || we.Class != verdict.ProductAssertion || !strings.Contains(we.Detail, "gpus is not supported") {
		t.Fatalf("%v", err)
	}
	names2 := tenant.For("tenant-y", "t2")
	env.HelmRelease(t, names2, "Unknown", "Progressing", "installing")
	var log bytes.Buffer
	// The wait names the phase its context belongs to.
	clock := budget.New(lane.Budget{JobCap: lane.Duration(time.Hour), Phases: []lane.Phase{{Name: "tenant", Ceiling: lane.Duration(700 * time.Millisecond)}}}, budget.Options{})
	short, span, err := clock.Phase(context.Background(), "tenant")
	if err != nil {
		t.Fatal(err)
	}
	defer span.End(nil)
	_, err = tenant.Platform{Mgmt: env.Cluster, Log: &log}.WaitControlPlane(short, names2)
	if !errors.As(err, &we) || we.Class != verdict.Deadline || !strings.Contains(err.Error(), "tenant: waiting for tenant control plane kubernetes-t2: still not there after") ||
		!strings.Contains(we.Detail, "Secret kubernetes-t2-admin-kubeconfig not written yet; HelmRelease Ready=Unknown Progressing installing") {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(log.String(), "tenant control plane kubernetes-t2: TenantControlPlane not created yet; Secret kubernetes-t2-admin-kubeconfig not written yet") {
		t.Errorf("progress log: %q", log.String())
	}
}

// WaitRendered waits until Flux attempted the HelmRelease generation that carries the harness's
// write, so a stale answer to an earlier spec is never taken for this one; the app itself has no
// generation (cozystack-api serves it from the HelmRelease).
func testWaitRenderedWaitsForTheGenerationItWrote(t *testing.T, env *tenantenv.Env) {
	ctx := testkit.Context(t, 30*time.Second)
	run, _ := tenant.NewRun("r1")
	names := run.Cluster("refusals")
	env.Namespace(t, names.Namespace)
	p := tenant.Platform{Mgmt: env.Cluster}
	if err := p.CreateCluster(ctx, tenant.ClusterSpec{Names: names, Version: "v1.35",
		Pools: []lane.Pool{{Name: "kairos", Class: "kairos"}}}); err != nil {
		t.Fatal(err)
	}
	app, err := p.Get(ctx, names)
	if err != nil || app.GetGeneration() != 0 {
		t.Fatalf("the app is a view of its HelmRelease and carries no generation: %v %v", app, err)
	}
	env.SetHelmReleaseStatus(t, names, 1, "True", "InstallSucceeded", "ok")
	gen, err := p.UpdatePool(ctx, names, "kairos", func(g map[string]any) { g["gpus"] = []any{map[string]any{"name": "nvidia"}} })
	if err != nil || gen != 2 {
		t.Fatalf("HelmRelease generation %d, %v", gen, err)
	}
	done := make(chan error, 1)
	var r tenant.Rendering
	go func() {
		var err error
		r, err = p.WaitRendered(ctx, names, gen)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("returned on the stale generation-1 answer: %+v %v", r, err)
	case <-time.After(300 * time.Millisecond):
	}
	// helm-controller says Ready=False while it still works on the release (a new reconcile
	// cancelled its health checks): no answer yet.
	env.SetHelmReleaseStatus(t, names, 2, "False", tenant.ReasonHealthCheckCanceled, "New reconciliation triggered")
	select {
	case err := <-done:
		t.Fatalf("returned on a Ready=False that is no answer: %+v %v", r, err)
	case <-time.After(300 * time.Millisecond):
	}
	msg := "nodeGroup kairos: gpus must be empty on a pool on a Kairos class"
	env.SetHelmReleaseStatus(t, names, 2, "False", "UpgradeFailed", msg)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.Ready || r.HelmRelease != msg {
		t.Fatalf("%+v", r)
	}
	// The app shows the HelmRelease's Ready as cozystack-api copies it.
	app, err = p.Get(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]any)["message"] != msg {
		t.Fatalf("app conditions %v", conds)
	}
}

func testUpdatePoolWritesBackWhatItChanged(t *testing.T, env *tenantenv.Env) {
	ctx := testkit.Context(t, 30*time.Second)
	names := tenant.For("tenant-z", "t1")
	env.Namespace(t, names.Namespace)
	p := tenant.Platform{Mgmt: env.Cluster}
	if err := p.CreateCluster(ctx, tenant.ClusterSpec{Names: names, Version: "v1.35",
		Pools: []lane.Pool{{Name: "a", Class: "kairos"}, {Name: "b", Class: "talos", Replicas: 1}}}); err != nil {
		t.Fatal(err)
	}
	app, _ := p.Get(ctx, names)
	orig, _, _ := unstructured.NestedMap(app.Object, "spec", "nodeGroups", "a")
	if _, err := p.UpdatePool(ctx, names, "a", func(g map[string]any) { g["osImage"] = "x"; g["nodeGroupClassName"] = "talos" }); err != nil {
		t.Fatal(err)
	}
	gen, err := p.UpdatePool(ctx, names, "a", tenant.Restore(orig))
	if err != nil || gen != 3 {
		t.Fatalf("generation %d, %v", gen, err)
	}
	app, _ = p.Get(ctx, names)
	a, _, _ := unstructured.NestedMap(app.Object, "spec", "nodeGroups", "a")
	if !equal(a, orig) {
		t.Errorf("pool a after the write-back: %v, want %v", a, orig)
	}
	if b, _, _ := unstructured.NestedInt64(app.Object, "spec", "nodeGroups", "b", "minReplicas"); b != 1 {
		t.Errorf("pool b touched: minReplicas %d", b)
	}
}
