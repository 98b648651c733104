package simulated_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/platform"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

const acmeImage = "registry.example.invalid/acme/kairos-worker@sha256:0000000000000000000000000000000000000000000000000000000000000001"

func testLane() *lane.Lane {
	return &lane.Lane{
		Name: "sim-test", Substrate: lane.SubstrateSim,
		Kubernetes: lane.Kubernetes{Version: "v1.35", Patch: "v1.35.4"},
		Budget: lane.Budget{JobCap: lane.Duration(10 * time.Minute), ArtifactReserve: lane.Duration(10 * time.Second),
			Phases: []lane.Phase{{Name: "cluster", Ceiling: lane.Duration(2 * time.Minute)}}},
	}
}

func u(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	o.SetGroupVersionKind(gvk)
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

// The sim substrate end to end: Up, a Tenant and a Kubernetes app with a Talos, a Kairos and an
// operator-class pool, the rendered objects, the MachineSets and Machines the real Cluster API
// controllers create, the tenant apiserver through the kubeconfig Secret, the platform's
// refusals, a tenant unable to create a NodeGroupClass, and Down leaving no process.
func TestSimSubstrateEndToEnd(t *testing.T) {
	cptest.Tools(t)
	t.Setenv("E2E_SIM_FAULT", "")
	t.Setenv("E2E_SIM_CANARY", "canary-value-for-the-test")
	artifacts := t.TempDir()
	work := os.Getenv("SIM_TEST_WORKDIR")
	s, err := simulated.New(testLane(), substrate.Options{Artifacts: artifacts, WorkDir: work, Log: testkit.LogWriter(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := s.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	clock := budget.New(testLane().Budget, budget.Options{})
	mgmt, err := s.Up(ctx, clock)
	if err != nil {
		t.Fatal(err)
	}
	downed := false
	defer func() {
		if !downed {
			_ = s.Down(context.Background())
		}
	}()
	t.Logf("Up took %s", time.Since(start).Round(time.Millisecond))
	c := mgmt.Client

	// An operator class, the tenant, then the app.
	acme := u(platform.NodeGroupClassGVK, "", "acme-kairos")
	acme.Object["spec"] = map[string]any{"os": "kairos", "image": acmeImage, "kubernetesVersion": "v1.35.4"}
	testkit.Must(t, c.Create(ctx, acme))
	tenant := u(platform.TenantGVK, platform.RootNamespace, "e2e1")
	tenant.Object["spec"] = map[string]any{"isolated": true}
	testkit.Must(t, c.Create(ctx, tenant))
	ns := "tenant-e2e1"
	testkit.Eventually(ctx, t, "the tenant namespace with its canary", 3*time.Minute, testkit.Err(func() error {
		var sec corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: platform.CanarySecret}, &sec); err != nil {
			return err
		}
		if string(sec.Data[platform.CanaryKey]) != "canary-value-for-the-test" {
			t.Fatalf("canary %q", sec.Data[platform.CanaryKey])
		}
		return nil
	}))

	t.Run("a tenant admin cannot create a NodeGroupClass", func(t *testing.T) {
		cfg := rest.CopyConfig(mgmt.REST)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{platform.TenantAdminGroup("e2e1")}}
		tc, err := cluster.New("tenant admin", cfg)
		testkit.Must(t, err)
		bad := u(platform.NodeGroupClassGVK, "", "mine")
		bad.Object["spec"] = map[string]any{"os": "talos"}
		if err := tc.Client.Create(ctx, bad); !apierrors.IsForbidden(err) {
			t.Fatalf("want Forbidden, got %v", err)
		}
		app := u(platform.KubernetesGVK, ns, "probe")
		app.Object["spec"] = map[string]any{"nodeGroups": map[string]any{}}
		if err := tc.Client.Create(ctx, app, client.DryRunAll); err != nil {
			t.Fatalf("the tenant admin may create apps in its namespace: %v", err)
		}
	})

	app := u(platform.KubernetesGVK, ns, "t1")
	app.Object["spec"] = map[string]any{"version": "v1.35", "nodeGroups": map[string]any{
		"md0":    map[string]any{"minReplicas": int64(2), "maxReplicas": int64(4), "logSerialConsole": true, "roles": []any{"ingress-nginx"}},
		"kairos": map[string]any{"minReplicas": int64(1), "maxReplicas": int64(2), "nodeGroupClassName": "kairos", "logSerialConsole": true},
		"acme":   map[string]any{"minReplicas": int64(1), "maxReplicas": int64(2), "nodeGroupClassName": "acme-kairos"},
	}}
	testkit.Must(t, c.Create(ctx, app))
	R := "kubernetes-t1"
	appStart := time.Now()

	testkit.Eventually(ctx, t, "HelmRelease Ready", 3*time.Minute, testkit.Err(func() error { return readyTrue(ctx, c, u(platform.HelmReleaseGVK, ns, R)) }))
	for _, o := range []*unstructured.Unstructured{
		u(platform.ClusterGVK, ns, R), u(platform.KamajiControlPlaneGVK, ns, R), u(platform.KubevirtClusterGVK, ns, R),
	} {
		testkit.Must(t, c.Get(ctx, client.ObjectKeyFromObject(o), o))
	}
	kcp := u(platform.KamajiControlPlaneGVK, ns, R)
	testkit.Must(t, c.Get(ctx, client.ObjectKeyFromObject(kcp), kcp))
	if dns, _, _ := unstructured.NestedStringSlice(kcp.Object, "spec", "network", "dnsServiceIPs"); len(dns) != 1 || dns[0] != "10.95.0.10" {
		t.Fatalf("KamajiControlPlane dnsServiceIPs %v", dns)
	}
	bootstrapKind := map[string]string{"md0": "TalosConfigTemplate", "kairos": "KairosConfigTemplate", "acme": "KairosConfigTemplate"}
	replicas := map[string]int32{"md0": 2, "kairos": 1, "acme": 1}
	for pool, kind := range bootstrapKind {
		md := R + "-" + pool
		gvk := platform.TalosConfigTemplateGVK
		if kind == "KairosConfigTemplate" {
			gvk = platform.KairosConfigTemplateGVK
		}
		testkit.Eventually(ctx, t, kind+" "+md, 3*time.Minute, testkit.Err(func() error { return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: md}, u(gvk, ns, md)) }))
		testkit.Must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: md}, u(platform.MachineHealthCheckGVK, ns, md)))
		var v2 clusterv1.MachineDeployment
		testkit.Must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: md}, &v2))
		if v2.Spec.Replicas == nil || *v2.Spec.Replicas != replicas[pool] {
			t.Fatalf("MachineDeployment %s replicas %v, want %d from the autoscaler min-size annotation", md, v2.Spec.Replicas, replicas[pool])
		}
		if v2.Spec.Template.Spec.Bootstrap.ConfigRef.Kind != kind {
			t.Fatalf("MachineDeployment %s bootstrap %s, want %s", md, v2.Spec.Template.Spec.Bootstrap.ConfigRef.Kind, kind)
		}
		kmt := u(platform.KubevirtMachineTemplateGVK, ns, v2.Spec.Template.Spec.InfrastructureRef.Name)
		testkit.Must(t, c.Get(ctx, client.ObjectKeyFromObject(kmt), kmt))
		_, efi, _ := unstructured.NestedMap(kmt.Object, "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain", "firmware")
		if efi != (kind == "KairosConfigTemplate") {
			t.Fatalf("KubevirtMachineTemplate %s: EFI firmware %v on a %s pool", kmt.GetName(), efi, kind)
		}
		testkit.Eventually(ctx, t, "Machines of "+md+" from the real MachineSet controller", 3*time.Minute, testkit.Err(func() error {
			var ms clusterv1.MachineSetList
			if err := c.List(ctx, &ms, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil {
				return err
			}
			var machines clusterv1.MachineList
			if err := c.List(ctx, &machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err != nil {
				return err
			}
			if len(ms.Items) != 1 || int32(len(machines.Items)) != replicas[pool] {
				return errorf("%d MachineSets, %d Machines", len(ms.Items), len(machines.Items))
			}
			return nil
		}))
	}
	t.Logf("app rendered and Machines created in %s", time.Since(appStart).Round(time.Millisecond))

	t.Run("the real Talos bootstrap provider and CAPK make a Talos Machine's data and VM", func(t *testing.T) {
		var machines clusterv1.MachineList
		testkit.Must(t, c.List(ctx, &machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: R + "-md0"}))
		for _, m := range machines.Items {
			testkit.Eventually(ctx, t, "bootstrap data and VirtualMachine of "+m.Name, 3*time.Minute, testkit.Err(func() error {
				var got clusterv1.Machine
				if err := c.Get(ctx, client.ObjectKeyFromObject(&m), &got); err != nil {
					return err
				}
				if got.Spec.Bootstrap.DataSecretName == nil {
					return errorf("no dataSecretName yet")
				}
				// CABPT v0.6.12 names the data <machine>-bootstrap-data; CAPK copies it into
				// <data>-userdata and names the VM after the KubevirtMachine.
				if want := m.Name + "-bootstrap-data"; *got.Spec.Bootstrap.DataSecretName != want {
					t.Fatalf("dataSecretName %q, want %q", *got.Spec.Bootstrap.DataSecretName, want)
				}
				var data, userdata corev1.Secret
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Name + "-bootstrap-data"}, &data); err != nil {
					return err
				}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Name + "-bootstrap-data-userdata"}, &userdata); err != nil {
					return err
				}
				if string(userdata.Data["userdata"]) != string(data.Data["value"]) || !strings.Contains(string(data.Data["value"]), "type: worker") {
					t.Fatalf("userdata is not the Talos bootstrap data")
				}
				vm := u(schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"}, ns, got.Spec.InfrastructureRef.Name)
				return c.Get(ctx, client.ObjectKeyFromObject(vm), vm)
			}))
		}
	})

	t.Run("the tenant apiserver answers through the kubeconfig Secret", func(t *testing.T) {
		tenant, err := mgmt.FromSecret(ctx, "tenant", ns, R+"-admin-kubeconfig", "super-admin.conf")
		testkit.Must(t, err)
		var cm corev1.ConfigMap
		testkit.Eventually(ctx, t, "kubelet-config", 3*time.Minute, testkit.Err(func() error {
			return tenant.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubelet-config"}, &cm)
		}))
		if !strings.Contains(cm.Data["kubelet"], "clusterDNS:\n- 10.95.0.10") {
			t.Fatalf("kubelet-config without clusterDNS 10.95.0.10:\n%s", cm.Data["kubelet"])
		}
		var sec corev1.Secret
		testkit.Must(t, tenant.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "sim-canary"}, &sec))
		_, err = mgmt.FromSecret(ctx, "tenant capi", ns, R+"-kubeconfig", "value")
		testkit.Must(t, err)
	})

	t.Run("a running Talos pool cannot switch to a Kairos class; live objects stay", func(t *testing.T) {
		cur := u(platform.KubernetesGVK, ns, "t1")
		testkit.Must(t, c.Get(ctx, client.ObjectKeyFromObject(cur), cur))
		_ = unstructured.SetNestedField(cur.Object, "kairos", "spec", "nodeGroups", "md0", "nodeGroupClassName")
		testkit.Must(t, c.Update(ctx, cur))
		testkit.Eventually(ctx, t, "HelmRelease Ready=False naming the pool", 3*time.Minute, testkit.Err(func() error {
			return readyFalse(ctx, c, u(platform.HelmReleaseGVK, ns, R), "nodeGroup md0: nodeGroupClassName")
		}))
		testkit.Eventually(ctx, t, "the app mirrors the refusal", 3*time.Minute, testkit.Err(func() error {
			return readyFalse(ctx, c, u(platform.KubernetesGVK, ns, "t1"), "cannot switch between a Talos and a Kairos class")
		}))
		var md clusterv1.MachineDeployment
		testkit.Must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: R + "-md0"}, &md))
		if md.Spec.Template.Spec.Bootstrap.ConfigRef.Kind != "TalosConfigTemplate" {
			t.Fatalf("the refused render changed the live MachineDeployment: %s", md.Spec.Template.Spec.Bootstrap.ConfigRef.Kind)
		}
	})

	t.Run("an unknown class is refused by name", func(t *testing.T) {
		bad := u(platform.KubernetesGVK, ns, "t2")
		bad.Object["spec"] = map[string]any{"nodeGroups": map[string]any{"p": map[string]any{"minReplicas": int64(0), "maxReplicas": int64(1), "nodeGroupClassName": "no-such-class"}}}
		testkit.Must(t, c.Create(ctx, bad))
		testkit.Eventually(ctx, t, "HelmRelease kubernetes-t2 Ready=False", 3*time.Minute, testkit.Err(func() error {
			return readyFalse(ctx, c, u(platform.HelmReleaseGVK, ns, "kubernetes-t2"), `NodeGroupClass "no-such-class" not found`)
		}))
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubernetes-t2"}, u(platform.ClusterGVK, ns, "kubernetes-t2")); !apierrors.IsNotFound(err) {
			t.Fatalf("a refused install created its Cluster: %v", err)
		}
	})

	pids := s.Pids()
	if len(pids) < 9 {
		t.Fatalf("%d processes; want the management five and a tenant's four", len(pids))
	}
	stop := time.Now()
	testkit.Must(t, s.Down(context.Background()))
	testkit.Must(t, s.Down(context.Background()))
	downed = true
	t.Logf("Down took %s", time.Since(stop).Round(time.Millisecond))
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("process %d still runs after Down", pid)
		}
	}
	if entries, _ := os.ReadDir(artifacts); len(entries) > 1 {
		t.Errorf("artifacts hold more than the substrate folder: %v", entries)
	}
}
