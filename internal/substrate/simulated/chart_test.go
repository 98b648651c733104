package simulated_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/bootstrap"
	"github.com/cozystack/cozy-e2e/internal/sim/cdi"
	"github.com/cozystack/cozy-e2e/internal/sim/guest"
	"github.com/cozystack/cozy-e2e/internal/sim/kamaji"
	"github.com/cozystack/cozy-e2e/internal/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/internal/sim/platform"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/vmsize"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// A Kubernetes app whose pools all run Talos goes through the real Cozystack v1.6.1 chart: the
// real helm-controller installs it from the ExternalArtifact the sim publishes, the chart's
// talos-reconcile Job runs its kubectl script on the host as its ServiceAccount and applies the
// TalosConfigTemplate, the bootstrap-token-tenant hook Job puts the bootstrap token into the
// tenant, an instance type the chart looks up exists, and the pool's worker joins with the
// bootstrap data the real Talos bootstrap provider made from that template, its Node given its
// providerID by the real CAPK.
func TestATalosAppJoinsThroughTheRealChart(t *testing.T) {
	cptest.Tools(t)
	t.Setenv("E2E_SIM_FAULT", "")
	work := os.Getenv("SIM_TEST_WORKDIR")
	s, err := simulated.New(testLane(), substrate.Options{Artifacts: t.TempDir(), WorkDir: work, Log: testkit.LogWriter(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, setup := range []func(ctrl.Manager, *simenv.Env) error{bootstrap.Setup, kubevirt.Setup, vmsize.Setup, cdi.Setup, guest.Setup} {
		s.AddStandIn(func(mgr ctrl.Manager, _ *world.World, env *simenv.Env) error { return setup(mgr, env) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mgmt, err := s.Up(ctx, budget.New(testLane().Budget, budget.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Down(context.Background()) }()
	c := mgmt.Client

	tenant := u(platform.TenantGVK, platform.RootNamespace, "chart")
	tenant.Object["spec"] = map[string]any{"isolated": true}
	testkit.Must(t, c.Create(ctx, tenant))
	ns := "tenant-chart"
	testkit.Eventually(ctx, t, "the tenant namespace", 3*time.Minute, testkit.Err(func() error { return c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}) }))
	app := u(platform.KubernetesGVK, ns, "t1")
	app.Object["spec"] = map[string]any{"version": "v1.35", "nodeGroups": map[string]any{
		// As the harness sizes a pool: by resources (the VM carries no instance type).
		"md0": map[string]any{"minReplicas": int64(1), "maxReplicas": int64(1), "instanceType": "u1.medium", "diskSize": "20Gi",
			"resources": map[string]any{"cpu": "1", "memory": "4Gi"}},
		// By instance type only: the chart renders it only if it finds u1.medium.
		"sized": map[string]any{"minReplicas": int64(0), "maxReplicas": int64(1), "instanceType": "u1.medium", "diskSize": "20Gi"},
	}}
	start := time.Now()
	testkit.Must(t, c.Create(ctx, app))
	R := "kubernetes-t1"
	hr := u(platform.HelmReleaseGVK, ns, R)
	testkit.Eventually(ctx, t, "HelmRelease installed by helm-controller", 3*time.Minute, testkit.Err(func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
			return err
		}
		if hr.GetLabels()[simenv.RendererLabel] != simenv.RendererChart {
			t.Fatalf("a Talos-only app's release is labelled %q", hr.GetLabels()[simenv.RendererLabel])
		}
		if s, m := cond(hr, "Ready"); s != "True" || !strings.Contains(m, "Helm install succeeded") {
			return errorf("Ready %s: %s", s, m)
		}
		return nil
	}))
	t.Logf("the chart installed in %s", time.Since(start).Round(time.Millisecond))
	for _, name := range []string{R + "-sized", R + "-md0"} {
		testkit.Must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u(platform.MachineDeploymentGVK, ns, name)))
	}

	tct := u(platform.TalosConfigTemplateGVK, ns, R+"-md0")
	testkit.Eventually(ctx, t, "the talos-reconcile Job's TalosConfigTemplate", 3*time.Minute, testkit.Err(func() error { return c.Get(ctx, client.ObjectKeyFromObject(tct), tct) }))
	t.Logf("TalosConfigTemplate applied %s after the app", time.Since(start).Round(time.Millisecond))
	data, _, _ := unstructured.NestedString(tct.Object, "spec", "template", "spec", "data")
	for _, want := range []string{"endpoint: https://" + R + "." + ns + ".svc:6443", "token: ", "extraHostEntries"} {
		if !strings.Contains(data, want) {
			t.Errorf("the Job's worker configuration lacks %q", want)
		}
	}
	var jobs batchv1.JobList
	testkit.Must(t, c.List(ctx, &jobs, client.InNamespace(ns)))
	for _, j := range jobs.Items {
		t.Logf("Job %s: succeeded %d failed %d", j.Name, j.Status.Succeeded, j.Status.Failed)
	}

	var m clusterv1.Machine
	testkit.Eventually(ctx, t, "the md0 Machine's Node", 3*time.Minute, testkit.Err(func() error {
		var ms clusterv1.MachineList
		if err := c.List(ctx, &ms, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: R + "-md0"}); err != nil {
			return err
		}
		if len(ms.Items) != 1 || ms.Items[0].Status.NodeRef.Name == "" {
			return errorf("%d Machines, none with a Node", len(ms.Items))
		}
		m = ms.Items[0]
		return nil
	}))
	tc, err := mgmt.FromSecret(ctx, "tenant", ns, R+"-admin-kubeconfig", "super-admin.conf")
	testkit.Must(t, err)
	var node corev1.Node
	testkit.Must(t, tc.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &node))
	if node.Name != m.Spec.InfrastructureRef.Name || node.Spec.ProviderID != "kubevirt://"+node.Name {
		t.Errorf("Node %s providerID %q; want named like its VMI %s with CAPK's providerID", node.Name, node.Spec.ProviderID, m.Spec.InfrastructureRef.Name)
	}
	var tokens corev1.SecretList
	testkit.Must(t, tc.Client.List(ctx, &tokens, client.InNamespace("kube-system"), client.MatchingFields{"type": string(corev1.SecretTypeBootstrapToken)}))
	if len(tokens.Items) != 1 {
		t.Errorf("%d bootstrap tokens in the tenant; the bootstrap-token-tenant Job writes one", len(tokens.Items))
	}
	t.Logf("the worker joined %s after the app", time.Since(start).Round(time.Millisecond))

	// The control plane stand-in at rest writes nothing: a reconcile that rewrites what it
	// reads is woken by its own write and loops for as long as the world runs.
	tcp := u(kamaji.TenantControlPlaneGVK, ns, R)
	kcp := u(kamaji.KamajiControlPlaneGVK, ns, R)
	rv := func() string {
		testkit.Must(t, c.Get(ctx, client.ObjectKeyFromObject(tcp), tcp))
		testkit.Must(t, c.Get(ctx, client.ObjectKeyFromObject(kcp), kcp))
		return tcp.GetResourceVersion() + "/" + kcp.GetResourceVersion()
	}
	before := rv()
	time.Sleep(3 * time.Second)
	if after := rv(); after != before {
		t.Errorf("TenantControlPlane/KamajiControlPlane %s written while nothing changed: resourceVersions %s, 3 s later %s", R, before, after)
	}
	if s, _, _ := unstructured.NestedString(tcp.Object, "status", "kubernetesResources", "version", "status"); s != "Ready" {
		t.Errorf("TenantControlPlane %s: version status %q, want Ready", R, s)
	}
}
