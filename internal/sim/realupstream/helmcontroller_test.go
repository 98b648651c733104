package realupstream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

const helmV2 = "helm.toolkit.fluxcd.io/v2"

// The real helm-controller v1.6.2 against the sim's management cluster: a chart served over
// local HTTP through an ExternalArtifact installs and reports Ready=True InstallSucceeded, and the
// Cozystack v1.6.1 Kubernetes chart, handed over as cozystack-api hands a Kubernetes app over,
// installs given the CRDs of every kind it renders; the test lists what it created.
func TestHelmController(t *testing.T) {
	b := findBuild(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w, hc, c := startController(ctx, t, b, "helm-controller", realupstream.StartHelmController)
	charts, err := realupstream.StartChartServer()
	if err != nil {
		t.Fatal(err)
	}
	defer charts.Close()
	create(ctx, t, c, `
apiVersion: v1
kind: Namespace
metadata:
  name: cozy-system`)

	t.Run("a chart served through an ExternalArtifact installs: Ready=True InstallSucceeded", func(t *testing.T) {
		archive, err := realupstream.PackChart(filepath.Join("testdata", "charts", "hello"))
		if err != nil {
			t.Fatal(err)
		}
		art := charts.Add("hello", archive)
		if err := realupstream.PublishExternalArtifact(ctx, c, "cozy-system", "hello", art); err != nil {
			t.Fatal(err)
		}
		createTenantNamespace(ctx, t, c, "tenant-hello")
		create(ctx, t, c, appRelease("tenant-hello", "hello", "hello", `
    greeting: hi`))
		hr := waitInstalled(ctx, t, c, "tenant-hello", "hello", hc.LogPath)
		var cm corev1.ConfigMap
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-hello", Name: "hello-greeting"}, &cm); err != nil {
			t.Fatal(err)
		}
		// spec.values and the cozystack-values Secret (valuesFrom) both reach the chart.
		if cm.Data["greeting"] != "hi" || cm.Data["cluster-domain"] != "cozy.local" {
			t.Errorf("ConfigMap data %v; want greeting hi (spec.values) and cluster-domain cozy.local (cozystack-values)", cm.Data)
		}
		if charts.Hits(art) == 0 {
			t.Errorf("helm-controller never fetched %s", art.URL)
		}
		hist, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
		if len(hist) == 0 {
			t.Fatalf("no status.history: status %v", hr.Object["status"])
		}
		h := &unstructured.Unstructured{Object: hist[0].(map[string]any)}
		// The chart version carries the artifact's digest (helmrelease_controller.go lines
		// 907-975, mutateChartWithSourceRevision: a digest revision becomes build metadata).
		digest := strings.TrimPrefix(art.Digest, "sha256:")
		if str(h, "chartName") != "hello" || !strings.HasPrefix(str(h, "chartVersion"), "0.1.0+"+digest[:12]) || str(h, "status") != "deployed" {
			t.Errorf("status.history[0] %v", h.Object)
		}
	})

	t.Run("the Cozystack v1.6.1 Kubernetes chart installs given the CRDs of what it renders", func(t *testing.T) {
		crds, err := b.ChartCRDs()
		if err != nil {
			t.Fatal(err)
		}
		for _, crd := range crds {
			t.Logf("CRD %s from %s", crd.CRD.Name, crd.Source)
		}
		capk, err := b.CAPKCRDs()
		if err != nil {
			t.Fatal(err)
		}
		if err := realupstream.InstallCRDs(ctx, w.Cluster, append(crds, capk...), nil); err != nil {
			t.Fatal(err)
		}
		c := freshClient(t, w)
		start := time.Now()
		archive, err := realupstream.PackChart(b.ChartDir())
		if err != nil {
			t.Fatal(err)
		}
		art := charts.Add("kubernetes", archive)
		t.Logf("chart packed in %s: %d bytes, %s", time.Since(start).Round(time.Millisecond), len(archive), art.Digest)
		// The ExternalArtifact the Kubernetes app's HelmRelease names (Cozystack v1.6.1
		// packages/system/kubernetes-rd/cozyrds/kubernetes.yaml lines 36-43).
		if err := realupstream.PublishExternalArtifact(ctx, c, "cozy-system", "cozystack-kubernetes-application-kubevirt-kubernetes", art); err != nil {
			t.Fatal(err)
		}
		createTenantNamespace(ctx, t, c, "tenant-e2e")
		// The app's spec as a tenant writes it: one node group sized by resources, so the
		// instance type is not looked up (templates/cluster.yaml lines 527-535).
		create(ctx, t, c, appRelease("tenant-e2e", "kubernetes-c1", "cozystack-kubernetes-application-kubevirt-kubernetes", `
    nodeGroups:
      md0:
        minReplicas: 1
        maxReplicas: 2
        instanceType: u1.medium
        diskSize: 20Gi
        resources:
          cpu: 2
          memory: 4Gi`))
		hr := waitInstalled(ctx, t, c, "tenant-e2e", "kubernetes-c1", hc.LogPath)
		entries, _, _ := unstructured.NestedSlice(hr.Object, "status", "inventory", "entries")
		kinds := map[string]int{}
		var missing []string
		for _, e := range entries {
			m := e.(map[string]any)
			id, _ := m["id"].(string)
			v, _ := m["v"].(string)
			parts := strings.Split(id, "_") // <namespace>_<name>_<group>_<kind>
			if len(parts) != 4 {
				t.Fatalf("inventory id %q", id)
			}
			kinds[parts[3]]++
			apiVersion := v
			if parts[2] != "" {
				apiVersion = parts[2] + "/" + v
			}
			if _, err := get(ctx, c, apiVersion, parts[3], parts[0], parts[1]); err != nil {
				missing = append(missing, fmt.Sprintf("%s %s/%s: %v", parts[3], parts[0], parts[1], err))
			}
		}
		var summary []string
		for k, n := range kinds {
			summary = append(summary, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(summary)
		t.Logf("the release created %d objects: %s", len(entries), strings.Join(summary, " "))
		if len(missing) > 0 {
			t.Errorf("inventoried but not in the apiserver:\n  %s", strings.Join(missing, "\n  "))
		}
		for _, k := range []string{"Cluster", "KamajiControlPlane", "KubevirtCluster", "KubevirtMachineTemplate", "MachineDeployment",
			"MachineHealthCheck", "Job", "HelmRelease", "Certificate", "Issuer", "WorkloadMonitor", "CiliumNetworkPolicy", "Deployment"} {
			if kinds[k] == 0 {
				t.Errorf("the release created no %s", k)
			}
		}
		// What the stand-ins must agree with: Cozystack renders the KubevirtCluster managed by
		// Kamaji and the machine template without an SSH bootstrap check.
		kc, err := get(ctx, c, infraV1, "KubevirtCluster", "tenant-e2e", "kubernetes-c1")
		if err != nil || kc.GetAnnotations()["cluster.x-k8s.io/managed-by"] != "kamaji" {
			t.Errorf("KubevirtCluster kubernetes-c1: %v, annotations %v", err, kc.GetAnnotations())
		}
		md, err := get(ctx, c, "cluster.x-k8s.io/v1beta1", "MachineDeployment", "tenant-e2e", "kubernetes-c1-md0")
		if err != nil {
			t.Fatal(err)
		}
		ref := str(md, "spec", "template", "spec", "bootstrap", "configRef", "kind") + " " + str(md, "spec", "template", "spec", "bootstrap", "configRef", "name")
		if ref != "TalosConfigTemplate kubernetes-c1-md0" {
			t.Errorf("MachineDeployment bootstrap configRef %q; the talos-reconcile Job creates TalosConfigTemplate kubernetes-c1-md0", ref)
		}
		// The chart's Jobs (the main-phase talos-reconcile, the post-install bootstrap-token hook
		// Helm waited for) ran on a kwok Node: kwok's pod-complete stage ends every Job's pod
		// Succeeded without running anything, so the TalosConfigTemplate the talos-reconcile Job
		// would apply does not exist. Running those scripts is phase 2's.
		var jobs batchv1.JobList
		if err := c.Client.List(ctx, &jobs, client.InNamespace("tenant-e2e")); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			t.Logf("Job %s: succeeded %d (kwok completed its pod; no script ran)", j.Name, j.Status.Succeeded)
		}
		if _, err := get(ctx, c, bootstrapV1, "TalosConfigTemplate", "tenant-e2e", "kubernetes-c1-md0"); err == nil {
			t.Logf("TalosConfigTemplate kubernetes-c1-md0 exists")
		} else {
			t.Logf("TalosConfigTemplate kubernetes-c1-md0: %v", err)
		}
	})
	logController(t, hc)
	logErrors(t, hc)
	if os.Getenv("DEBUG_HC") != "" {
		data, _ := os.ReadFile(hc.LogPath)
		_ = os.WriteFile("/tmp/hc-debug.log", data, 0o644)
	}
}

// appRelease is a HelmRelease as cozystack-api writes one for an app (Cozystack v1.6.1
// pkg/registry/apps/application/rest.go lines 1577-1634, with the Kubernetes app's release
// settings of packages/system/kubernetes-rd/cozyrds/kubernetes.yaml lines 18-43: the tenants
// shard label, a 20 m install timeout and no wait): the chart from an ExternalArtifact in
// cozy-system, the values of the app's spec, and the platform's values from the namespace's
// cozystack-values Secret.
func appRelease(ns, name, artifact, values string) string {
	return `
apiVersion: ` + helmV2 + `
kind: HelmRelease
metadata:
  name: ` + name + `
  namespace: ` + ns + `
  labels:
    sharding.fluxcd.io/key: tenants
spec:
  chartRef:
    kind: ExternalArtifact
    name: ` + artifact + `
    namespace: cozy-system
  interval: 5m
  maxHistory: 5
  install:
    timeout: 20m
    disableWait: true
    strategy:
      name: RetryOnFailure
      retryInterval: 1m
  upgrade:
    timeout: 20m
    disableWait: true
    strategy:
      name: RetryOnFailure
      retryInterval: 1m
  valuesFrom:
  - kind: Secret
    name: cozystack-values
  values:` + values
}

// createTenantNamespace makes a tenant namespace with the cozystack-values Secret the Tenant
// chart writes into it (Cozystack v1.6.1 packages/apps/tenant/templates/namespace.yaml lines
// 107-129), with the platform's cluster domain (packages/core/platform values.yaml).
func createTenantNamespace(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	create(ctx, t, c, `
apiVersion: v1
kind: Namespace
metadata:
  name: `+ns+`
---
apiVersion: v1
kind: Secret
metadata:
  name: cozystack-values
  namespace: `+ns+`
  labels:
    reconcile.fluxcd.io/watch: Enabled
type: Opaque
stringData:
  values.yaml: |
    _cluster:
      cluster-domain: cozy.local
    _namespace:
      etcd: tenant-root
      ingress: tenant-root
      gateway: ""
      monitoring: tenant-root
      seaweedfs: ""
      host: example.org`)
}

// waitInstalled waits for the HelmRelease to be Ready=True with reason InstallSucceeded at its
// generation, with the release in its history: helm-controller patches the conditions during the
// release action and the history and inventory when it is done.
func waitInstalled(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name, log string) *unstructured.Unstructured {
	t.Helper()
	var hr *unstructured.Unstructured
	testkit.Eventually(ctx, t, "HelmRelease "+ns+"/"+name+" Ready=True InstallSucceeded", 2*time.Minute, func() (bool, string) {
		var err error
		if hr, err = get(ctx, c, helmV2, "HelmRelease", ns, name); err != nil {
			return false, err.Error()
		}
		s, r, m := condition(hr, "Ready")
		observed, _, _ := unstructured.NestedInt64(hr.Object, "status", "observedGeneration")
		hist, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
		return s == "True" && r == "InstallSucceeded" && observed == hr.GetGeneration() && len(hist) > 0,
			fmt.Sprintf("Ready=%s %s: %s (observedGeneration %d of %d, %d in history)", s, r, m, observed, hr.GetGeneration(), len(hist))
	}, endOf(log))
	return hr
}
