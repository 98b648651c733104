package platform

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/testkit/tenantenv"
)

// The chart's objects are written once per generation of the app's HelmRelease, as Helm
// installs or upgrades a release without drift detection (inSync): the passes the stand-in
// makes every 2 s while the reconcile Jobs wait for the control plane leave the
// MachineDeployment as it is, so Cluster API's MachineDeployment controller hears of no change
// (each write was one more failed pass against a bootstrap template not there yet, and a
// back-off of minutes). A new generation is still applied.
//
// A real apiserver with the fixture CRDs behind the cozystack-api stand-in: the apps are created
// and changed as the harness does in a sim run, and the release is rendered by calling the
// platform's reconciler as its controller does. No control plane comes up, so every pass asks
// for the next one.
func TestChartObjectsAreAppliedOncePerReleaseGeneration(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	env := tenantenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := env.Cluster.Client
	if err := InstallBuiltins(ctx, c); err != nil {
		t.Fatal(err)
	}
	p := newPlatform(Options{Versions: map[string]string{"v1.35": "v1.35.4"}}, c, c)

	run, err := tenant.NewRun("once")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, tenant.TenantApp(run)); err != nil {
		t.Fatalf("creating the Tenant app: %v", err)
	}
	tenantRelease := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: RootNamespace, Name: NamespacePrefix + run.TenantName()}}
	if _, err := p.reconcileTenant(ctx, tenantRelease); err != nil {
		t.Fatalf("reconciling the Tenant's HelmRelease %s: %v", tenantRelease, err)
	}

	// A Kairos pool: rendered by the platform's model (the real chart renders Talos-only apps).
	names := run.Cluster("classes")
	pool := names.Pool("kairos")
	harness := tenant.Platform{Mgmt: env.Cluster}
	if err := harness.CreateCluster(ctx, tenant.ClusterSpec{Names: names, Version: "v1.35",
		Pools: []lane.Pool{{Name: pool.Pool, Class: tenant.ClassKairos, Replicas: 1}}}); err != nil {
		t.Fatal(err)
	}
	release := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: names.Namespace, Name: names.HelmRelease()}}
	gen, err := harness.ReleaseGeneration(ctx, names)
	if err != nil {
		t.Fatal(err)
	}

	pass(ctx, t, p, release, gen, "install")
	installed := machineDeployment(ctx, t, c, pool)
	requireSize(t, installed, "1", "install")
	for i := 1; i <= 3; i++ {
		pass(ctx, t, p, release, gen, "repeat")
		again := machineDeployment(ctx, t, c, pool)
		if again.GetResourceVersion() != installed.GetResourceVersion() || again.GetGeneration() != installed.GetGeneration() {
			t.Fatalf("pass %d at HelmRelease generation %d rewrote MachineDeployment %s/%s: resourceVersion %s -> %s, generation %d -> %d; "+
				"the chart's objects must be applied once per generation (inSync in helmrelease.go), or Cluster API hears of a change every pass",
				i+1, gen, pool.Namespace, pool.MachineDeployment(), installed.GetResourceVersion(), again.GetResourceVersion(),
				installed.GetGeneration(), again.GetGeneration())
		}
	}

	// The passes above prove something only if applying the render again would be seen: the live
	// MachineDeployment does not read back as rendered (here the fixture CRD stores v1beta2 with
	// no conversion, so the render's v1beta1-only fields do not survive), so a re-apply writes.
	reapplied := reapplyMachineDeployment(ctx, t, p, release, pool)
	if reapplied.GetResourceVersion() == installed.GetResourceVersion() {
		t.Fatalf("re-applying the render of MachineDeployment %s left its resourceVersion at %s: on this apiserver a re-apply is no write, "+
			"so the unchanged passes above prove nothing; make the live object differ from the render (a field the render leaves out)",
			pool.MachineDeployment(), installed.GetResourceVersion())
	}

	// The harness scales the pool: a new generation, which Helm upgrades to.
	upgraded, err := harness.UpdatePool(ctx, names, pool.Pool, func(g map[string]any) {
		g["minReplicas"], g["maxReplicas"] = int64(2), int64(2)
	})
	if err != nil {
		t.Fatal(err)
	}
	if upgraded <= gen {
		t.Fatalf("HelmRelease %s: generation %d after the pool's change, want above %d", release, upgraded, gen)
	}
	pass(ctx, t, p, release, upgraded, "upgrade")
	after := machineDeployment(ctx, t, c, pool)
	if after.GetResourceVersion() == reapplied.GetResourceVersion() {
		t.Errorf("MachineDeployment %s: resourceVersion still %s after HelmRelease generation %d, want the upgrade applied", pool.MachineDeployment(), after.GetResourceVersion(), upgraded)
	}
	requireSize(t, after, "2", "upgrade")
}

// The autoscaler bounds the render writes on a pool's MachineDeployment (render_pool.go).
const (
	autoscalerMinSize = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	autoscalerMaxSize = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
)

// pass runs one reconcile of release and requires what the controller then sees: the release
// Ready at generation gen, and another pass asked for (the control plane is not up).
func pass(ctx context.Context, t *testing.T, p *Platform, release reconcile.Request, gen int64, what string) {
	t.Helper()
	res, err := p.reconcileKubernetes(ctx, release)
	if err != nil {
		t.Fatalf("%s pass of HelmRelease %s: %v", what, release, err)
	}
	if res.RequeueAfter == 0 {
		t.Fatalf("%s pass of HelmRelease %s: no further pass asked for (%+v); with no control plane up the stand-in must come back, as the reconcile Jobs poll", what, release, res)
	}
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(HelmReleaseGVK)
	if err := p.c.Get(ctx, release.NamespacedName, hr); err != nil {
		t.Fatal(err)
	}
	if !inSync(hr) || hr.GetGeneration() != gen {
		t.Fatalf("%s pass of HelmRelease %s: generation %d, Ready %q (%s), want released at generation %d",
			what, release, hr.GetGeneration(), conditionStatus(hr, "Ready"), conditionMessage(hr, "Ready"), gen)
	}
}

// requireSize requires md's autoscaler bounds to be the pool's minReplicas and maxReplicas, want.
func requireSize(t *testing.T, md *unstructured.Unstructured, want, what string) {
	t.Helper()
	for _, a := range []string{autoscalerMinSize, autoscalerMaxSize} {
		if got := md.GetAnnotations()[a]; got != want {
			t.Fatalf("MachineDeployment %s after the %s: %s = %q, want the pool's %s", md.GetName(), what, a, got, want)
		}
	}
}

// reapplyMachineDeployment renders release as reconcileKubernetes does and applies the pool's
// MachineDeployment once more, returning it as it then is.
func reapplyMachineDeployment(ctx context.Context, t *testing.T, p *Platform, release reconcile.Request, pool tenant.PoolNames) *unstructured.Unstructured {
	t.Helper()
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(HelmReleaseGVK)
	if err := p.c.Get(ctx, release.NamespacedName, hr); err != nil {
		t.Fatal(err)
	}
	app := App{Namespace: hr.GetNamespace(), Name: hr.GetLabels()[AppNameLabel]}
	app.Spec, _, _ = unstructured.NestedMap(hr.Object, "spec", "values")
	live, err := p.live(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := Render(app, p.class(ctx), live, p.o)
	if err != nil {
		t.Fatalf("rendering HelmRelease %s: %v", release, err)
	}
	md := find(rendered.Objects, MachineDeploymentGVK.Kind, pool.MachineDeployment())
	if md == nil {
		t.Fatalf("the render of HelmRelease %s has no MachineDeployment %s", release, pool.MachineDeployment())
	}
	if err := p.apply(ctx, md, hr); err != nil {
		t.Fatal(err)
	}
	return machineDeployment(ctx, t, p.c, pool)
}

func machineDeployment(ctx context.Context, t *testing.T, c client.Client, pool tenant.PoolNames) *unstructured.Unstructured {
	t.Helper()
	md := &unstructured.Unstructured{}
	md.SetGroupVersionKind(MachineDeploymentGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.MachineDeployment()}, md); err != nil {
		t.Fatalf("MachineDeployment %s of %s: %v", pool.MachineDeployment(), pool, err)
	}
	return md
}
