package platform

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
)

const img = "registry.example.invalid/acme/kairos-worker@sha256:0000000000000000000000000000000000000000000000000000000000000001"

func opts() Options {
	return Options{Versions: map[string]string{"v1.35": "v1.35.4"}, Health: ChartHealthTimers()}
}

func classes(name string) (Class, bool) {
	switch name {
	case "acme":
		return Class{Name: "acme", OS: "kairos", Image: img, KubernetesVersion: "v1.35.4"}, true
	case "acme-old":
		return Class{Name: "acme-old", OS: "kairos", Image: img, KubernetesVersion: "v1.34.9"}, true
	}
	return Class{}, false
}

func app(pools map[string]any) App {
	return App{Namespace: "tenant-test", Name: "t1", Spec: map[string]any{"version": "v1.35", "nodeGroups": pools}}
}

func pool(extra map[string]any) map[string]any {
	p := map[string]any{"minReplicas": int64(1), "maxReplicas": int64(3)}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func find(objs []*unstructured.Unstructured, kind, prefix string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasPrefix(o.GetName(), prefix) {
			return o
		}
	}
	return nil
}

// The chart's refusals name the pool and field, as the HelmRelease message shows them.
func TestRenderRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool map[string]any
		live Live
		want string
	}{
		{"unknown class", pool(map[string]any{"nodeGroupClassName": "nope"}), Live{}, `nodeGroup p: nodeGroupClassName NodeGroupClass "nope" not found`},
		{"kairos pool with osImage", pool(map[string]any{"nodeGroupClassName": "kairos", "osImage": "x"}), Live{}, `nodeGroup p: osImage must be empty on a pool on Kairos class "kairos"`},
		{"kairos pool with kernelModules", pool(map[string]any{"nodeGroupClassName": "acme", "kernelModules": []any{"drbd"}}), Live{}, `nodeGroup p: kernelModules must be empty on a pool on Kairos class "acme"`},
		{"kairos pool with gpus", pool(map[string]any{"nodeGroupClassName": "kairos", "gpus": []any{map[string]any{"name": "nvidia"}}}), Live{}, `nodeGroup p: gpus must be empty on a pool on Kairos class "kairos" (the Kairos worker image carries no GPU driver)`},
		{"talos pool switching to kairos", pool(map[string]any{"nodeGroupClassName": "kairos"}), Live{BootstrapKind: map[string]string{"p": "TalosConfigTemplate"}},
			`nodeGroup p: nodeGroupClassName MachineDeployment kubernetes-t1-p runs on a TalosConfigTemplate; a running pool cannot switch between a Talos and a Kairos class`},
		{"kairos pool switching to talos", pool(nil), Live{BootstrapKind: map[string]string{"p": "KairosConfigTemplate"}},
			`nodeGroup p: nodeGroupClassName MachineDeployment kubernetes-t1-p runs on a KairosConfigTemplate`},
		{"operator class of another minor", pool(map[string]any{"nodeGroupClassName": "acme-old"}), Live{}, `NodeGroupClass "acme-old" is built for Kubernetes v1.34.9, the cluster runs v1.35`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(app(map[string]any{"p": tc.pool}), classes, tc.live, opts())
			var r *Refusal
			if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want refusal %q, got %v", tc.want, err)
			}
		})
	}
	// A version the chart does not map is refused with the chart's own message; each version it
	// maps renders at its own release.
	a := app(map[string]any{"p": pool(nil)})
	a.Spec["version"] = "v1.30"
	o := opts()
	o.Versions["v1.34"] = "v1.34.9"
	if _, err := Render(a, classes, Live{}, o); err == nil || !strings.Contains(err.Error(), "Kubernetes version v1.30 is not supported, allowed versions are [v1.34 v1.35]") {
		t.Fatalf("an unmapped version: %v", err)
	}
	a.Spec["version"] = "v1.34"
	if r, err := Render(a, classes, Live{}, o); err != nil || r.Version != "v1.34.9" {
		t.Fatalf("v1.34 renders at %v (%v), want v1.34.9", r, err)
	}
	// A pool still on the kubeadm bootstrap moves to either class.
	if _, err := Render(app(map[string]any{"p": pool(map[string]any{"nodeGroupClassName": "kairos"})}), classes,
		Live{BootstrapKind: map[string]string{"p": "KubeadmConfigTemplate"}}, opts()); err != nil {
		t.Fatalf("a kubeadm pool moving to kairos was refused: %v", err)
	}
}

func TestRenderPoolsByClass(t *testing.T) {
	r, err := Render(app(map[string]any{
		"md0":    pool(map[string]any{"minReplicas": int64(2), "logSerialConsole": true, "roles": []any{"ingress-nginx"}}),
		"kairos": pool(map[string]any{"nodeGroupClassName": "kairos"}),
		"acme":   pool(map[string]any{"nodeGroupClassName": "acme"}),
	}), classes, Live{ControlPlaneUp: true, Talos: talosInputs()}, opts())
	if err != nil {
		t.Fatal(err)
	}
	kcp := find(r.Objects, "KamajiControlPlane", "kubernetes-t1")
	dns, _, _ := unstructured.NestedStringSlice(kcp.Object, "spec", "network", "dnsServiceIPs")
	if len(dns) != 1 || dns[0] != "10.95.0.10" {
		t.Fatalf("dnsServiceIPs %v, want [10.95.0.10] (from the service CIDR 10.95.0.0/16)", dns)
	}
	md := find(r.Objects, "MachineDeployment", "kubernetes-t1-md0")
	if _, has, _ := unstructured.NestedFieldNoCopy(md.Object, "spec", "replicas"); has {
		t.Fatal("the chart renders no spec.replicas; the autoscaler annotation seeds it")
	}
	if md.GetAnnotations()["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"] != "2" {
		t.Fatalf("annotations %v", md.GetAnnotations())
	}
	for _, tc := range []struct{ pool, kind, version, disk string }{
		{"md0", "TalosConfigTemplate", "v1.35.4", "factory.talos.dev"},
		{"kairos", "KairosConfigTemplate", "v1.35.4", "docker://ghcr.io/cozystack/cozystack/kairos-worker-v1.35"},
		{"acme", "KairosConfigTemplate", "v1.35.4", "docker://" + img},
	} {
		md := find(r.Objects, "MachineDeployment", "kubernetes-t1-"+tc.pool)
		kind, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "bootstrap", "configRef", "kind")
		version, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "version")
		if kind != tc.kind || version != tc.version {
			t.Errorf("pool %s: bootstrap %s version %s, want %s %s", tc.pool, kind, version, tc.kind, tc.version)
		}
		if find(r.Bootstrap, tc.kind, "kubernetes-t1-"+tc.pool) == nil {
			t.Errorf("pool %s: no %s rendered", tc.pool, tc.kind)
		}
		kmtName, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "infrastructureRef", "name")
		kmt := find(r.Objects, "KubevirtMachineTemplate", kmtName)
		if kmt == nil || len(kmtName) != len("kubernetes-t1-"+tc.pool)+7 {
			t.Fatalf("pool %s: KubevirtMachineTemplate %q (want kubernetes-t1-%s-<sha6>)", tc.pool, kmtName, tc.pool)
		}
		domain, _, _ := unstructured.NestedMap(kmt.Object, "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain")
		_, efi := domain["firmware"]
		if efi != (tc.kind == "KairosConfigTemplate") {
			t.Errorf("pool %s: EFI firmware %v", tc.pool, efi)
		}
		dvs, _, _ := unstructured.NestedSlice(kmt.Object, "spec", "template", "spec", "virtualMachineTemplate", "spec", "dataVolumeTemplates")
		if !strings.Contains(fmtAny(dvs), tc.disk) {
			t.Errorf("pool %s: disk source %v, want %s", tc.pool, dvs, tc.disk)
		}
	}
	again, _ := Render(app(map[string]any{"md0": pool(map[string]any{"minReplicas": int64(2), "logSerialConsole": false, "roles": []any{"ingress-nginx"}})}),
		classes, Live{}, opts())
	if find(again.Objects, "KubevirtMachineTemplate", "kubernetes-t1-md0").GetName() == find(r.Objects, "KubevirtMachineTemplate", "kubernetes-t1-md0").GetName() {
		t.Fatal("toggling logSerialConsole must change the KubevirtMachineTemplate's hash")
	}
	if len(again.Bootstrap) != 0 {
		t.Fatal("bootstrap templates are applied only once their reconcile Job's inputs are there")
	}
}

func talosInputs() *TalosInputs {
	return &TalosInputs{ServiceIP: "10.96.12.34", TalosCA: "VEFMT1M=", K8sCA: "SzhT", CoreDNSIP: "10.96.0.10",
		Secrets: talosSecrets{Token: "abcdef.0123456789abcdef", ClusterID: "id", ClusterSecret: "secret", BootstrapTokenID: "k8sjn1", BootstrapTokenSecret: "0123456789abcdef"}}
}

// A Talos pool's TalosConfigTemplate is what the chart's talos-reconcile Job applies: generateType
// none with the full worker configuration, the endpoint behind the apiserver's Service name with
// its address among the extra host entries, the Kamaji CA, the release's bootstrap token, and
// the node group's reservations.
func TestTalosTemplateCarriesWhatTheJobWrites(t *testing.T) {
	r, err := Render(app(map[string]any{
		"md0": pool(map[string]any{"resources": map[string]any{"cpu": "4", "memory": "16Gi"}}),
	}), classes, Live{Talos: talosInputs()}, opts())
	if err != nil {
		t.Fatal(err)
	}
	data := func(p string) string {
		tct := find(r.Bootstrap, "TalosConfigTemplate", "kubernetes-t1-"+p)
		if tct == nil {
			t.Fatalf("pool %s: no TalosConfigTemplate", p)
		}
		if g, _, _ := unstructured.NestedString(tct.Object, "spec", "template", "spec", "generateType"); g != "none" {
			t.Fatalf("generateType %q", g)
		}
		d, _, _ := unstructured.NestedString(tct.Object, "spec", "template", "spec", "data")
		return d
	}
	md0 := data("md0")
	for _, want := range []string{"endpoint: https://kubernetes-t1.tenant-test.svc:6443", "- ip: 10.96.12.34", "- kubernetes-t1.tenant-test.svc\n",
		"token: k8sjn1.0123456789abcdef", "crt: SzhT", "crt: VEFMT1M=", "token: abcdef.0123456789abcdef", "- 10.96.0.10",
		"image: ghcr.io/siderolabs/kubelet:v1.35.4", `cpu: "200m"`, `memory: "819Mi"`} {
		if !strings.Contains(md0, want) {
			t.Errorf("pool md0's machine configuration lacks %q:\n%s", want, md0)
		}
	}
	if cpu, mem := reservations(nil); cpu != "50m" || mem != "256Mi" {
		t.Errorf("default reservations %s %s, want 50m 256Mi", cpu, mem)
	}
}

func TestClusterDNSMismatchFaultRendersAnAddressNoCoreDNSHolds(t *testing.T) {
	set, err := faults.Parse("cluster-dns-mismatch")
	if err != nil {
		t.Fatal(err)
	}
	o := opts()
	o.Faults = set
	r, err := Render(app(map[string]any{"md0": pool(nil)}), classes, Live{}, o)
	if err != nil {
		t.Fatal(err)
	}
	dns, found, _ := unstructured.NestedSlice(find(r.Objects, "KamajiControlPlane", "kubernetes-t1").Object, "spec", "network", "dnsServiceIPs")
	if !found || len(dns) != 1 || dns[0] != "10.95.0.53" {
		t.Fatalf("dnsServiceIPs %v under cluster-dns-mismatch, want [10.95.0.53] (CoreDNS is at 10.95.0.10)", dns)
	}
}

func fmtAny(v any) string { return strings.ReplaceAll(strings.TrimSpace(fmtSprint(v)), "\n", " ") }

// The MachineHealthCheck gets the chart's values, the app's nodeHealthCheck over them, and a
// node group's own over both (templates/cluster.yaml:821-849); maxUnhealthy renders as the
// chart renders it, a percentage as a string and a bare integer as a number.
func TestMachineHealthCheckValues(t *testing.T) {
	a := app(map[string]any{"md0": pool(nil), "own": pool(map[string]any{"maxUnhealthy": "0", "nodeStartupTimeout": "90s"})})
	r, err := Render(a, classes, Live{}, opts())
	if err != nil {
		t.Fatal(err)
	}
	spec := func(r *Rendered, p string) map[string]any {
		s, _, _ := unstructured.NestedMap(find(r.Objects, "MachineHealthCheck", "kubernetes-t1-"+p).Object, "spec")
		return s
	}
	md0 := spec(r, "md0")
	if md0["maxUnhealthy"] != "50%" || md0["nodeStartupTimeout"] != "10m0s" {
		t.Errorf("chart defaults: %v", md0)
	}
	conds := fmtAny(md0["unhealthyConditions"])
	if !strings.Contains(conds, "Unknown") || !strings.Contains(conds, "30s") || !strings.Contains(conds, "5m0s") {
		t.Errorf("unhealthy conditions %s", conds)
	}
	if own := spec(r, "own"); own["maxUnhealthy"] != int64(0) || own["nodeStartupTimeout"] != "90s" {
		t.Errorf("the node group's own: %v", own)
	}
	a.Spec["nodeHealthCheck"] = map[string]any{"maxUnhealthy": "100%", "nodeStartupTimeout": "2m"}
	r, err = Render(a, classes, Live{}, opts())
	if err != nil {
		t.Fatal(err)
	}
	if md0 := spec(r, "md0"); md0["maxUnhealthy"] != "100%" || md0["nodeStartupTimeout"] != "2m" {
		t.Errorf("the app's nodeHealthCheck: %v", md0)
	}
	a.Spec["nodeHealthCheck"] = map[string]any{"maxUnhealthy": "half"}
	if _, err := Render(a, classes, Live{}, opts()); err == nil || !strings.Contains(err.Error(), `must be a bare integer (e.g. 0, 1) or an integer percentage (e.g. 50%), got "half"`) {
		t.Errorf("a bad maxUnhealthy: %v", err)
	}
}
