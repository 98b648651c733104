package simtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
)

// Machines adds what the stand-ins rely on beside the apiserver: kube-controller-manager (garbage
// collection, volume binding), kube-scheduler, and kwok playing one management node with the
// given allocatable memory (kwok-managed Nodes carry kwok.x-k8s.io/node=fake).
func (e *Env) Machines(t testing.TB, memory string) {
	t.Helper()
	tools := cptest.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(e.Dir, "management")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kcm, err := controlplane.StartControllerManager(ctx, tools, e.API, controlplane.ControllerManagerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kcm.Stop(5 * time.Second) })
	sched, err := controlplane.StartScheduler(ctx, tools, e.API, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sched.Stop(5 * time.Second) })
	startKwok(ctx, t, tools, e.API, dir)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "sim-node-1", Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": "sim-node-1", "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if err := e.Cluster.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
}

// Tenant starts a second apiserver (a tenant's) with kwok managing kwok.x-k8s.io/node=fake
// Nodes, and returns it with a harness client.
func Tenant(t testing.TB) (*controlplane.APIServer, *cluster.Cluster) {
	t.Helper()
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "tenant"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	startKwok(ctx, t, cptest.Tools(t), api, t.TempDir())
	return api, tenantClient(t, api)
}

// KamajiTenant starts a tenant control plane as the Kamaji stand-in runs one for
// TenantControlPlane namespace/name: its apiserver's certificate holds the Service names
// <name>.<namespace>.svc[.cluster.local] and it authenticates bootstrap tokens, its
// kube-controller-manager approves and signs the kubelets' CSRs, and kwok plays the Nodes
// annotated kwok.x-k8s.io/node=fake. The caller writes what Kamaji and the platform write into
// it (RBAC, tokens).
func KamajiTenant(t testing.TB, namespace, name string) (*controlplane.APIServer, *cluster.Cluster) {
	t.Helper()
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "tenant",
		SANs:      []string{name, name + "." + namespace + ".svc", name + "." + namespace + ".svc.cluster.local"},
		ExtraArgs: []string{"--enable-bootstrap-token-auth=true"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	kcm, err := controlplane.StartControllerManager(ctx, cptest.Tools(t), api, controlplane.ControllerManagerOptions{Dir: dir,
		Controllers: "*,-nodeipam,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kcm.Stop(5 * time.Second) })
	startKwok(ctx, t, cptest.Tools(t), api, dir)
	return api, tenantClient(t, api)
}

// startKwok runs kwok against api with its files in dir, playing only the Nodes annotated
// kwok.x-k8s.io/node=fake; it is stopped when the test ends.
func startKwok(ctx context.Context, t testing.TB, tools controlplane.Tools, api *controlplane.APIServer, dir string) {
	t.Helper()
	kwok, err := controlplane.StartKwok(ctx, tools, api, controlplane.KwokOptions{Dir: dir,
		ExtraArgs: []string{"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--cidr=" + PodCIDR}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kwok.Stop(5 * time.Second) })
}

// tenantClient is a harness client of a tenant's apiserver.
func tenantClient(t testing.TB, api *controlplane.APIServer) *cluster.Cluster {
	t.Helper()
	c, err := cluster.New("tenant", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
