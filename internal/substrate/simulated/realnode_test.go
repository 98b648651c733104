package simulated_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/budget"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/bootstrap"
	"github.com/cozystack/cozy-e2e/internal/sim/cdi"
	"github.com/cozystack/cozy-e2e/internal/sim/guest"
	"github.com/cozystack/cozy-e2e/internal/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/sim/vmsize"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/substrate"
	"github.com/cozystack/cozy-e2e/internal/substrate/simulated"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// A lane with sim.realNode brings the real Node into the sim's world: the management
// apiserver advertises this host's address (the kubernetes Service's endpoint, where the Node's
// pods reach it), the Node registers Ready beside kwok's, virt-handler runs on it as
// virt-operator installs it for the lane's KubeVirt CR, the CDI CR lists the local registry, and
// Down leaves nothing of the Node on the host.
func TestARealNodeLaneBringsTheNodeIntoTheWorld(t *testing.T) {
	cptest.Tools(t)
	if err := simulated.NodePreflight(simulated.ThisHost()); err != nil {
		testkit.Unavailable(t, err)
	}
	t.Setenv("E2E_SIM_FAULT", "")
	l := testLane()
	l.Sim = &lane.SimSettings{RealNode: true}
	// A real Node's guests run the workload image built here; the lane pins it, as sim-node does.
	img, err := node.WorkloadImage()
	testkit.Must(t, err)
	d, err := img.Digest()
	testkit.Must(t, err)
	l.Workload = lane.Workload{Image: node.WorkloadRepo, Digest: d.String()}
	l.Budget.Phases[0].Ceiling = lane.Duration(simtest.HostSlotWait + 7*time.Minute)
	s, err := simulated.New(l, substrate.Options{Artifacts: t.TempDir(), Log: testkit.LogWriter(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, setup := range []func(ctrl.Manager, *simenv.Env) error{bootstrap.Setup, kubevirt.Setup, vmsize.Setup, cdi.Setup, guest.Setup} {
		s.AddStandIn(func(mgr ctrl.Manager, _ *world.World, env *simenv.Env) error { return setup(mgr, env) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), simtest.HostSlotWait+9*time.Minute)
	defer cancel()
	start := time.Now()
	_, err = s.Up(ctx, budget.New(l.Budget, budget.Options{}))
	downed := false
	defer func() {
		if !downed {
			_ = s.Down(context.Background())
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the sim with its real Node up in %s", time.Since(start).Round(100*time.Millisecond))
	c := s.World().Cluster.Client
	addr, err := node.HostAddress()
	testkit.Must(t, err)

	var n corev1.Node
	testkit.Must(t, c.Get(ctx, client.ObjectKey{Name: simulated.RealNodeName}, &n))
	if n.Labels[node.Label] != "true" || !slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == node.Taint }) {
		t.Errorf("Node %s: labels %v taints %v, want the real Node's label and taint", n.Name, n.Labels, n.Spec.Taints)
	}
	var epSlices discoveryv1.EndpointSliceList
	testkit.Must(t, c.List(ctx, &epSlices, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}))
	var eps []string
	for _, es := range epSlices.Items {
		for _, e := range es.Endpoints {
			eps = append(eps, e.Addresses...)
		}
	}
	if !slices.Contains(eps, addr) {
		t.Errorf("the kubernetes Service's endpoints %v, want this host's %s", eps, addr)
	}
	var pods corev1.PodList
	testkit.Must(t, c.List(ctx, &pods, client.InNamespace(realupstream.KubeVirtNamespace), client.MatchingLabels{"kubevirt.io": "virt-handler"}))
	if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != simulated.RealNodeName || pods.Items[0].Status.Phase != corev1.PodRunning {
		t.Errorf("virt-handler Pods %d, want one Running on %s", len(pods.Items), simulated.RealNodeName)
	}
	cfg := &unstructured.Unstructured{}
	cfg.SetGroupVersionKind(realupstream.CDIConfigGVR.GroupVersion().WithKind("CDIConfig"))
	testkit.Must(t, c.Get(ctx, client.ObjectKey{Name: "config"}, cfg))
	regs, _, _ := unstructured.NestedStringSlice(cfg.Object, "spec", "insecureRegistries")
	if len(regs) != 1 || !strings.HasPrefix(regs[0], addr+":") {
		t.Errorf("CDIConfig insecureRegistries %v, want the local registry on %s", regs, addr)
	}
	dir := s.Env().Dir

	downed = true
	testkit.Must(t, s.Down(context.Background()))
	if _, err := os.Stat(filepath.Join(dir, "node")); !os.IsNotExist(err) {
		t.Errorf("the real Node's folder after Down: %v", err)
	}
	out, _ := os.ReadFile("/proc/self/mounts")
	if strings.Contains(string(out), dir) {
		t.Errorf("mounts under %s after Down", dir)
	}
}
