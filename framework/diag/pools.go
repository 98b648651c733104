package diag

import (
	"sort"
	"strings"
	"sync"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// pools attributes an object to the pool it belongs to, by its name: every object of a pool is
// named after the pool's MachineDeployment R-<pool> (MachineSets, Machines, bootstrap configs,
// KubevirtMachines, VMs, VMIs, tenant Nodes), or after one of them (DataVolume <vm>-disk-system,
// importer-<dv>, virt-launcher-<vmi>-<rand>). Labels are not needed, so an object is attributed
// even when a stand-in or a provider forgets one, and a Node named otherwise (a hostname
// mismatch) is left to its cluster's files, where the identity collector points at it.
type pools struct {
	mu     sync.RWMutex
	byName []tenant.PoolNames // longest MachineDeployment name first
}

func (p *pools) add(pn tenant.PoolNames) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, have := range p.byName {
		if have.MachineDeployment() == pn.MachineDeployment() && have.Namespace == pn.Namespace {
			return false
		}
	}
	p.byName = append(p.byName, pn)
	sort.SliceStable(p.byName, func(i, j int) bool {
		return len(p.byName[i].MachineDeployment()) > len(p.byName[j].MachineDeployment())
	})
	return true
}

func (p *pools) list() []tenant.PoolNames {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return append([]tenant.PoolNames(nil), p.byName...)
}

// of returns the pool object name belongs to.
func (p *pools) of(name string) (tenant.PoolNames, bool) {
	name = strings.TrimPrefix(name, tenant.ImporterPrefix)
	name = strings.TrimPrefix(name, tenant.LauncherPrefix)
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, pn := range p.byName {
		md := pn.MachineDeployment()
		if name == md || strings.HasPrefix(name, md+"-") {
			return pn, true
		}
	}
	return tenant.PoolNames{}, false
}

// poolDir is the pool's folder under the artifacts root (docs/architecture.md: pools/<pool>/).
func poolDir(pn tenant.PoolNames) string { return "pools/" + pn.Pool }

// vmiOfLauncher is the VMI a virt-launcher Pod runs: its vm.kubevirt.io/name label, or its name
// without the prefix and the random suffix.
func vmiOfLauncher(pod string, labels map[string]string) string {
	if v := labels[tenant.LabelVMName]; v != "" {
		return v
	}
	rest := strings.TrimPrefix(pod, tenant.LauncherPrefix)
	if i := strings.LastIndexByte(rest, '-'); i > 0 {
		return rest[:i]
	}
	return rest
}
