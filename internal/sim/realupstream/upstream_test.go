package realupstream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// findBuild finds what `make tools` built. Like the control plane, missing binaries fail the
// test under CI (CI set) and skip it elsewhere, saying `make tools`.
func findBuild(t *testing.T) *realupstream.Build {
	t.Helper()
	tools := cptest.Tools(t)
	b, err := realupstream.Find(tools)
	if err != nil {
		testkit.Unavailable(t, err)
	}
	return b
}

// startWorld runs the sim's management cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok, every fixture CRD, the Cluster API controllers and their webhooks,
// conversion included), stopped when the test ends.
func startWorld(ctx context.Context, t *testing.T, b *realupstream.Build) *world.World {
	t.Helper()
	start := time.Now()
	w, err := world.Start(ctx, world.Options{Tools: b.Tools, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("management world up in %s", time.Since(start).Round(time.Millisecond))
	return w
}

// freshClient is a client whose discovery sees CRDs installed since the world started.
func freshClient(t *testing.T, w *world.World) *cluster.Cluster {
	t.Helper()
	c, err := cluster.New("management", w.API.Admin())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startController starts the sim's management world and, against it, the controller that start
// starts, stopped when the test ends. It logs how the controller started and returns the world,
// the controller and a client that sees the CRDs the controller installed.
func startController(ctx context.Context, t *testing.T, b *realupstream.Build, name string,
	start func(context.Context, *realupstream.Build, *cluster.Cluster, realupstream.Options) (*realupstream.Controller, error),
) (*world.World, *realupstream.Controller, *cluster.Cluster) {
	t.Helper()
	w := startWorld(ctx, t, b)
	ctl, err := start(ctx, b, w.Cluster, realupstream.Options{Dir: controllerDir(t, name), Kubeconfig: w.API.AdminKubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Stop(5 * time.Second) })
	logController(t, ctl)
	return w, ctl, freshClient(t, w)
}

// logController reports how long a controller took to get ready and what it holds in memory.
func logController(t *testing.T, c *realupstream.Controller) {
	t.Helper()
	rss, peak, err := c.Memory()
	if err != nil {
		t.Logf("%s: ready in %s (memory: %v)", c.Name, c.Ready.Round(time.Millisecond), err)
		return
	}
	t.Logf("%s: ready in %s, RSS %d MiB (peak %d MiB)", c.Name, c.Ready.Round(time.Millisecond), rss>>20, peak>>20)
}

// objects decodes a multi-document YAML into unstructured objects.
func objects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("test object: %v\n%s", err, doc)
		}
		out = append(out, u)
	}
	return out
}

// create creates every object of docs.
func create(ctx context.Context, t *testing.T, c *cluster.Cluster, docs string) {
	t.Helper()
	for _, o := range objects(t, docs) {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// get reads apiVersion/kind namespace/name as unstructured.
func get(ctx context.Context, c *cluster.Cluster, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	return u, err
}

// endOf is the evidence of a wait that the end of the log at path is.
func endOf(path string) func() string {
	return func() string { return fmt.Sprintf("end of %s:\n%s", path, tailOf(path, 25)) }
}

func tailOf(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "  " + err.Error()
	}
	return "  " + strings.ReplaceAll(testkit.Tail(string(data), n), "\n", "\n  ")
}

func str(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

func boolean(u *unstructured.Unstructured, fields ...string) bool {
	b, _, _ := unstructured.NestedBool(u.Object, fields...)
	return b
}

// condition is the status and reason of condition typ in status.conditions.
func condition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return
		}
	}
	return "", "", ""
}

func controllerDir(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name) }

// logErrors reports the error lines of a controller's log (klog's E prefix, or a JSON "error"
// level), for the record: the upstream controllers log what they could not do, and what they
// could not do here (no KubeVirt, no tenant cluster) is worth seeing next to what they did.
func logErrors(t *testing.T, c *realupstream.Controller) {
	t.Helper()
	data, err := os.ReadFile(c.LogPath)
	if err != nil {
		t.Logf("%s: %v", c.Name, err)
		return
	}
	var errs []string
	for _, l := range strings.Split(string(data), "\n") {
		if (len(l) > 5 && l[0] == 'E' && l[1] >= '0' && l[1] <= '9') || strings.Contains(l, `"level":"error"`) {
			errs = append(errs, l)
		}
	}
	if len(errs) > 8 {
		errs = append(errs[:8], fmt.Sprintf("... and %d more", len(errs)-8))
	}
	t.Logf("%s logged %d error lines:\n  %s", c.Name, len(errs), strings.Join(errs, "\n  "))
}

// fixtures/upstream/README.md says where every CRD the package installs comes from: each is
// named there with its module and version.
func TestREADMEListsEveryCRD(t *testing.T) {
	b := findBuild(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "upstream", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	var all []realupstream.CRD
	kubevirt := func() ([]realupstream.CRD, error) {
		kv, err := b.KubeVirtInstall(context.Background())
		if err != nil {
			return nil, err
		}
		return kv.CRDs, nil
	}
	for _, f := range []func() ([]realupstream.CRD, error){b.CAPKCRDs, b.CABPTCRDs, b.FluxCRDs, b.ChartCRDs, kubevirt, b.CDICRDs} {
		crds, err := f()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, crds...)
	}
	for _, c := range all {
		if !strings.Contains(readme, "`"+c.CRD.Name+"`") {
			t.Errorf("fixtures/upstream/README.md does not name %s (from %s)", c.CRD.Name, c.Source)
		}
	}
	for _, comp := range b.Components {
		if !strings.Contains(readme, "`"+comp.Module+"` "+comp.Version) {
			t.Errorf("fixtures/upstream/README.md does not name %s %s", comp.Module, comp.Version)
		}
	}
	// CAPK 4, CABPT 2, Flux 4, the chart's 8 (one of them KubeVirt's too), KubeVirt's 19, CDI's 12.
	names := map[string]bool{}
	for _, c := range all {
		names[c.CRD.Name] = true
	}
	if len(names) != 48 {
		t.Errorf("%d CRDs; the README lists 48", len(names))
	}
}

// A controller that cannot start is named with the end of its log, and takes its webhook
// configuration away again: one failing closed and pointing at nothing would refuse every write
// of its kinds.
func TestAControllerThatCannotStartLeavesNoWebhook(t *testing.T) {
	b := findBuild(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "upstream"})
	c, err := cluster.New("upstream", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	_, err = realupstream.StartCAPK(ctx, b, c, realupstream.Options{Dir: controllerDir(t, "capk"), Kubeconfig: api.AdminKubeconfig, ExtraArgs: []string{"--no-such-flag"}})
	if err == nil || !strings.Contains(err.Error(), "capk-manager exited") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("want an error naming capk-manager and quoting its log, got %v", err)
	}
	var hooks admissionv1.ValidatingWebhookConfigurationList
	if err := c.Client.List(ctx, &hooks); err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks.Items {
		t.Errorf("webhook configuration %s left behind", h.Name)
	}
}

// The platform's instance types are read from its package: u1.medium, which the harness's node
// groups name, is 1 CPU and 4Gi.
func TestInstanceTypes(t *testing.T) {
	b := findBuild(t)
	its, err := b.InstanceTypes()
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.GetName() != "u1.medium" {
			continue
		}
		cpu, _, _ := unstructured.NestedFieldNoCopy(it.Object, "spec", "cpu", "guest")
		mem, _, _ := unstructured.NestedString(it.Object, "spec", "memory", "guest")
		if fmt.Sprint(cpu) != "1" || mem != "4Gi" {
			t.Fatalf("u1.medium: cpu %v memory %s", cpu, mem)
		}
		t.Logf("%d instance types, u1.medium among them", len(its))
		return
	}
	t.Fatalf("no u1.medium among %d instance types", len(its))
}
