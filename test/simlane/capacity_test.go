package simlane

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/framework/sim/world"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/suites/registry"
)

// A worker's disk binds on first consumer to the node its temporary launcher was placed on, and
// the launcher that follows must go there whatever else landed on that node meanwhile. So any
// one node may end up holding every worker of a phase: each sim node must hold a sim lane's
// peak on its own, or a green run turns red on where the scheduler happened to put the disks.
func TestEachSimNodeHoldsEachSimLanesPeakWorkers(t *testing.T) {
	lanes, err := lane.LoadDir(filepath.Join("..", "..", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	cores, err := strconv.ParseUint(tenant.WorkerCPU, 10, 32)
	if err != nil {
		t.Fatalf("tenant.WorkerCPU %q: %v", tenant.WorkerCPU, err)
	}
	guest := resource.MustParse(fmt.Sprintf("%dGi", tenant.WorkerMemoryGiB))
	vmi := &kubevirtv1.VirtualMachineInstance{Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
		CPU:    &kubevirtv1.CPU{Cores: uint32(cores)},
		Memory: &kubevirtv1.Memory{Guest: &guest},
	}}}
	launcher := kubevirt.Requests(vmi)[corev1.ResourceMemory]
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
