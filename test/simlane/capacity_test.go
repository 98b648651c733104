package simlane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/framework/sim/simtest"
	"github.com/cozystack/cozy-e2e/framework/sim/world"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/suites/registry"
)

// A worker's disk binds on first consumer to the node its temporary launcher was placed on, and
// the launcher that follows must go there whatever else landed on that node meanwhile. So any
// one node may end up holding every worker of a phase: each sim node must hold a sim lane's
// peak on its own, or a green run turns red on where the scheduler happened to put the disks.
// A worker's launcher is what the real virt-controller asks for a worker's VM: the guest's
// memory and KubeVirt's overhead, read from the launcher it makes.
func TestEachSimNodeHoldsEachSimLanesPeakWorkers(t *testing.T) {
	lanes, err := lane.LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	launcher := workerLauncherMemory(t)
	sim := 0
	for _, l := range lanes {
		if l.Substrate != lane.SubstrateSim {
			continue
		}
		sim++
		peak, err := registry.PeakWorkers(l)
		if err != nil {
			t.Fatalf("%s: %v", l.File, err)
		}
		need := resource.NewQuantity(int64(peak.Workers)*launcher.Value(), resource.BinarySI)
		for _, n := range world.DefaultNodes() {
			have := resource.MustParse(n.Memory)
			if have.Cmp(*need) < 0 {
				t.Errorf("%s: %d workers at most (%s), %s each in their launchers: %s, but sim node %s has %s",
					l.File, peak.Workers, peak.Why, launcher.String(), need.String(), n.Name, n.Memory)
			}
		}
	}
	if sim == 0 {
		t.Fatal("no sim lane under lanes/")
	}
}

// workerLauncherMemory is the memory the real virt-controller's launcher asks for a worker VM
// as the harness sizes it (tenant.WorkerCPU cores, tenant.WorkerMemoryGiB of guest memory).
func workerLauncherMemory(t *testing.T) resource.Quantity {
	t.Helper()
	cores, err := strconv.ParseUint(tenant.WorkerCPU, 10, 32)
	if err != nil {
		t.Fatalf("tenant.WorkerCPU %q: %v", tenant.WorkerCPU, err)
	}
	e := simtest.Start(t)
	ctl := e.VirtController(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.Cluster.Client
	// The namespace and its default service account (no kube-controller-manager runs here to
	// make it; the apiserver refuses a Pod without it).
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capacity"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "capacity", Name: "default"}}} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	guest := resource.MustParse(fmt.Sprintf("%dGi", tenant.WorkerMemoryGiB))
	// The worker's domain as CAPK writes it from the chart's template: cores, guest memory, one
	// interface on the pod network.
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "capacity", Name: "worker"},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				CPU: &kubevirtv1.CPU{Cores: uint32(cores)}, Memory: &kubevirtv1.Memory{Guest: &guest},
				Devices: kubevirtv1.Devices{Interfaces: []kubevirtv1.Interface{{Name: "default",
					InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}}},
			},
			Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
		}}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
			return false, err
		}
		pod, err = kubevirt.Launcher(ctx, c, vmi)
		return pod != nil, err
	})
	if err != nil {
		log, _ := os.ReadFile(ctl.LogPath)
		t.Fatalf("virt-controller made no launcher for a worker VMI: %v; VMI status %+v; end of %s:\n%s", err, vmi.Status, ctl.LogPath, tail(string(log), 15))
	}
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == kubevirt.ComputeContainer {
			mem := ctr.Resources.Requests[corev1.ResourceMemory]
			t.Logf("a worker of %d cores and %s: launcher %s asks for %s of memory", cores, guest.String(), pod.Name, mem.String())
			return mem
		}
	}
	t.Fatalf("launcher %s has no %s container", pod.Name, kubevirt.ComputeContainer)
	return resource.Quantity{}
}
