package diag

import (
	"sort"

	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

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
	// vmiOf maps a launcher Pod's name to its VMI's: the apiserver cuts a long VMI's launcher
	// name (see tenant.LauncherPrefix), so the Pod is attributed through its VMI.
	vmiOf map[string]string
}

// learnLauncher records that launcher Pod pod runs VMI vmi.
func (p *pools) learnLauncher(pod, vmi string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.vmiOf == nil {
		p.vmiOf = map[string]string{}
	}
	p.vmiOf[pod] = vmi
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

// of returns the pool object name belongs to.
func (p *pools) of(name string) (tenant.PoolNames, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if vmi, ok := p.vmiOf[name]; ok {
		name = vmi
	}
	name = strings.TrimPrefix(name, tenant.ImporterPrefix)
	name = strings.TrimPrefix(name, tenant.LauncherPrefix)
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

// vmiOfLauncher is the VMI a virt-launcher Pod runs: its controller owner, which KubeVirt sets
// to the VMI together with the kubevirt.io/created-by label (kubevirt/kubevirt v1.8.4
// pkg/virt-controller/services/template.go:641-643, :1614). "" when the Pod is no launcher.
func vmiOfLauncher(p *corev1.Pod) string {
	if tenant.LauncherVMIUID(p.Labels) == "" {
		return ""
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "VirtualMachineInstance" && string(o.UID) == tenant.LauncherVMIUID(p.Labels) {
			return o.Name
		}
	}
	return ""
}
