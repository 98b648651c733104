package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
)

// The local control plane is real: it serves v1.35.4, installs a CRD, validates against its
// schema, round-trips an object through the status subresource, and stops without leaving a
// process behind.
func TestControlPlaneRoundTripsACustomResource(t *testing.T) {
	tools := cptest.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()

	start := time.Now()
	etcd, err := controlplane.StartEtcd(ctx, tools, dir)
	if err != nil {
		t.Fatal(err)
	}
	api, err := controlplane.StartAPIServer(ctx, tools, controlplane.APIServerOptions{Name: "itest", Dir: dir, EtcdURL: etcd.ClientURL})
	if err != nil {
		etcd.Stop(5 * time.Second)
		t.Fatal(err)
	}
	t.Logf("etcd + kube-apiserver ready in %s", time.Since(start).Round(time.Millisecond))
	pids := []int{etcd.Pid(), api.Pid()}

	c, err := cluster.New("itest", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Kube.Discovery().ServerVersion()
	if err != nil || info.GitVersion != "v1.35.4" {
		t.Fatalf("server version %v, %v; want v1.35.4 (version ldflags in hack/tools/build.sh)", info, err)
	}

	data, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "testdata", "widgets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, &crd); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(&crd), &got); err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD never Established: %v", err)
	}

	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.cozy-e2e.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": "default"},
		"spec":     map[string]any{"size": int64(3)},
	}}
	// The discovery cache of a fresh client may predate the CRD; a new client sees it.
	c, err = cluster.New("itest", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(w.Object, true, "status", "ready"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("example.cozy-e2e.io/v1")
	got.SetKind("Widget")
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "w1"}, got); err != nil {
		t.Fatal(err)
	}
	size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
	ready, _, _ := unstructured.NestedBool(got.Object, "status", "ready")
	if size != 3 || !ready {
		t.Fatalf("round trip lost data: %v", got.Object)
	}

	bad := w.DeepCopy()
	bad.SetName("bad")
	bad.SetResourceVersion("")
	_ = unstructured.SetNestedField(bad.Object, "three", "spec", "size")
	err = c.Client.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "spec.size in body must be of type integer") {
		t.Fatalf("schema did not refuse a string size: %v", err)
	}

	stop := time.Now()
	api.Stop(10 * time.Second)
	etcd.Stop(5 * time.Second)
	t.Logf("stopped in %s", time.Since(stop).Round(time.Millisecond))
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still runs after Stop", pid)
		}
	}
}

// A process that cannot start names itself and the end of its log.
func TestAPIServerFailureNamesTheProcessAndItsLog(t *testing.T) {
	tools := cptest.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := controlplane.StartAPIServer(ctx, tools, controlplane.APIServerOptions{
		Name: "broken", Dir: t.TempDir(), EtcdURL: "http://127.0.0.1:1", ExtraArgs: []string{"--no-such-flag"},
	})
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver broken exited") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("want an error naming the process and quoting its log, got %v", err)
	}
}
