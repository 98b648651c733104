package install

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cozystack/cozy-e2e/fixtures"
	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/install/catalog"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// env is one local apiserver shared by the subtests of a test.
type env struct {
	t   *testing.T
	c   *cluster.Cluster
	a   *Applier
	dyn dynamic.Interface
}

func newEnv(t *testing.T) *env {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "install"})
	c, err := cluster.New("install", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewApplier(c)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, c: c, a: a, dyn: a.Dynamic()}
}

// crds installs CRDs (the vendored and written fixtures by name, and files under fixtures/kind)
// and waits until the apiserver serves them.
func (e *env) crds(names []string, files ...string) {
	e.t.Helper()
	ctx := testkit.Context(e.t, time.Minute)
	all, err := fixtures.CRDs()
	if err != nil {
		e.t.Fatal(err)
	}
	var objs []Object
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, f := range all {
		if want[f.CRD.Name] {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(f.CRD)
			if err != nil {
				e.t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetAPIVersion("apiextensions.k8s.io/v1")
			u.SetKind("CustomResourceDefinition")
			objs = append(objs, Object{Source: f.File, Obj: u})
		}
	}
	for _, file := range files {
		m, err := Fetch(ctx, filepath.Join("..", "..", "fixtures", "kind", "crds", file), "")
		if err != nil {
			e.t.Fatal(err)
		}
		o, err := m.Objects()
		if err != nil {
			e.t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	if err := e.a.Apply(ctx, objs); err != nil {
		e.t.Fatal(err)
	}
	var crdNames []string
	for _, o := range objs {
		crdNames = append(crdNames, o.Obj.GetName())
	}
	if err := CRDsEstablished(ctx, e.dyn, crdNames, GateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) create(gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	e.t.Helper()
	out, err := e.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func (e *env) setStatus(gvr schema.GroupVersionResource, u *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
	e.t.Helper()
	cur, err := e.dyn.Resource(gvr).Namespace(u.GetNamespace()).Get(context.Background(), u.GetName(), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cur.Object["status"] = status
	out, err := e.dyn.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatalf("status of %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func (e *env) namespace(name string) {
	e.t.Helper()
	_, err := e.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(context.Background(), obj("v1", "Namespace", "", name), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	// No controller manager runs here to make the default ServiceAccount pods need.
	_, err = e.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}).Namespace(name).Create(context.Background(), obj("v1", "ServiceAccount", name, "default"), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
}

func testLane(t *testing.T) *lane.Lane {
	t.Helper()
	l, err := lane.Load(filepath.Join("..", "..", "lanes", "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// What the harness itself applies passes the apiserver's validation: server-side dry runs of
// the storage classes, the operator asset with its address filled in, the platform Package and
// the MetalLB pool; a dry run persists nothing; a refused object is named with its source.
func TestManifestsPassAServerSideDryRun(t *testing.T) {
	e := newEnv(t)
	e.crds(nil, "packages.cozystack.io.yaml", "metallb.io.yaml")
	e.namespace("cozy-metallb")
	ctx := testkit.Context(t, time.Minute)
	dry := &Applier{c: e.c, dyn: e.dyn, DryRun: true}

	if err := dry.Apply(ctx, StorageClasses()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Kube.StorageV1().StorageClasses().Get(ctx, "local", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run left StorageClass local behind: %v", err)
	}

	m, err := Fetch(ctx, filepath.Join("testdata", OperatorAsset), "")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := m.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if err := SetAPIServerHost(objs, "172.18.0.2"); err != nil {
		t.Fatal(err)
	}
	if err := dry.Apply(ctx, objs[:1]); err != nil { // the namespace, for real, so its objects can be tried
		t.Fatal(err)
	}
	if err := e.a.Apply(ctx, objs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := dry.Apply(ctx, objs); err != nil {
		t.Fatal(err)
	}
	dep := objs[len(objs)-1].Obj
	env, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if !strings.Contains(strings.ReplaceAll(toString(env), " ", ""), "KUBERNETES_SERVICE_HOSTvalue:172.18.0.2") {
		t.Fatalf("the apiserver address was not filled in: %v", env)
	}
	if err := SetAPIServerHost(objs, "172.18.0.3"); err == nil {
		t.Fatal("a second fill found the placeholder again")
	}

	pkg, err := PlatformPackage(testLane(t), PlatformInput{ControlPlaneIP: "172.18.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := dry.Apply(ctx, []Object{pkg}); err != nil {
		t.Fatal(err)
	}
	pool, err := MetalLBPool("cozy-metallb", "172.18.255.200-172.18.255.250")
	if err != nil {
		t.Fatal(err)
	}
	if err := dry.Apply(ctx, pool); err != nil {
		t.Fatal(err)
	}

	bad := pkg.Obj.DeepCopy()
	unstructured.RemoveNestedField(bad.Object, "spec", "variant")
	err = dry.Apply(ctx, []Object{{Source: "test: package without a variant", Obj: bad}})
	if err == nil || !strings.Contains(err.Error(), "Package cozystack.cozystack-platform (from test: package without a variant)") || !strings.Contains(err.Error(), "variant") {
		t.Fatalf("want the refusal naming the object, its source and the field, got %v", err)
	}
	unknown := obj("example.invalid/v1", "Nothing", "", "x")
	if err := dry.Apply(ctx, []Object{{Source: "test", Obj: unknown}}); err == nil || !strings.Contains(err.Error(), "is the CRD that defines it installed?") {
		t.Fatalf("an unserved kind: %v", err)
	}
}

func toString(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, i := range x {
				walk(i)
			}
		case map[string]any:
			if n, ok := x["name"].(string); ok {
				b.WriteString(n)
			}
			if val, ok := x["value"].(string); ok {
				b.WriteString("value:" + val + ";")
			}
			for _, i := range x {
				walk(i)
			}
		}
	}
	walk(v)
	return b.String()
}

// The component gates on a real apiserver: CRDs Established (the Cluster API CRDs as the module
// ships them), Deployments Available (watch-driven: a status written later ends the wait), a
// wait that runs out says where it is stuck.
func TestCRDAndDeploymentGates(t *testing.T) {
	e := newEnv(t)
	capi, _ := catalog.Find("capi-core")
	e.crds(capi.CRDs)
	if err := CRDsEstablished(testkit.Context(t, 30*time.Second), e.dyn, capi.CRDs, GateOptions{}); err != nil {
		t.Fatal(err)
	}
	kairos, _ := catalog.Find("capi-kairos-bootstrap")
	err := CRDsEstablished(testkit.Context(t, 2*time.Second), e.dyn, append([]string{capi.CRDs[0]}, kairos.CRDs...), GateOptions{})
	var stuck *StuckError
	if !errors.As(err, &stuck) || !strings.Contains(err.Error(), "CRD kairosconfigs.bootstrap.cluster.x-k8s.io not created yet") {
		t.Fatalf("want stuck at the missing CRD, got %v", err)
	}

	e.namespace("cozy-kubevirt")
	ready := e.deployment("cozy-kubevirt", "virt-operator", "quay.io/kubevirt/virt-operator:v1.8.4", nil)
	e.available(ready, "True", "MinimumReplicasAvailable", "")
	slow := e.deployment("cozy-kubevirt", "virt-api", "quay.io/kubevirt/virt-api:v1.8.4", nil)
	e.available(slow, "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
	err = DeploymentsAvailable(testkit.Context(t, 2*time.Second), e.dyn, "cozy-kubevirt", []string{"virt-operator", "virt-api", "virt-controller"}, GateOptions{})
	for _, want := range []string{"stuck for", "deployment virt-api: Available=\"False\" (MinimumReplicasUnavailable: Deployment does not have minimum availability.)", "deployment virt-controller not created yet"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		e.available(slow, "True", "MinimumReplicasAvailable", "")
	}()
	start := time.Now()
	if err := DeploymentsAvailable(testkit.Context(t, 20*time.Second), e.dyn, "cozy-kubevirt", []string{"virt-operator", "virt-api"}, GateOptions{}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the wait took %s: it does not follow the watch", time.Since(start))
	}
}

func (e *env) deployment(ns, name, image string, labels map[string]string) *unstructured.Unstructured {
	e.t.Helper()
	u := obj("apps/v1", "Deployment", ns, name)
	sel := map[string]any{"app": name}
	for k, v := range labels {
		sel[k] = v
	}
	u.Object["spec"] = map[string]any{
		"selector": map[string]any{"matchLabels": sel},
		"template": map[string]any{
			"metadata": map[string]any{"labels": sel},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "manager", "image": image}}},
		},
	}
	return e.create(gvrDeployment, u)
}

func (e *env) available(d *unstructured.Unstructured, status, reason, message string) {
	e.setStatus(gvrDeployment, d, map[string]any{
		"observedGeneration": d.GetGeneration(),
		"conditions":         []any{map[string]any{"type": "Available", "status": status, "reason": reason, "message": message}},
	})
}
