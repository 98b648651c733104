// Package capacity is what the sim's management cluster holds of a lane's worker VMs: the
// Nodes the sim plays (world.DefaultNodes) and the price of one worker on them, its
// virt-launcher Pod's requests as the sim's KubeVirt makes the Pod and as the real
// kube-scheduler adds them up. The lane check asks it, so a sim lane the check accepts never
// goes red for capacity, and one that cannot fit is refused before any phase.
package capacity

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/framework/sim/world"
)

// Nodes are the management Nodes the sim plays.
func Nodes() []world.NodeSpec { return world.DefaultNodes() }

// Price is what one worker VM asks of a management Node.
type Price struct {
	Memory, CPU resource.Quantity
}

func (p Price) String() string {
	return fmt.Sprintf("%s memory and %s cpu", mi(p.Memory), p.CPU.String())
}

// WorkerVMI is a worker's VMI as CAPK makes it from the KubevirtMachineTemplate the chart
// renders for a node group: cores vCPUs and guest memory (nodeGroups.<pool>.resources), the
// console log container when the pool asks for it (logSerialConsole).
func WorkerVMI(cores uint32, guest resource.Quantity, console bool) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
		CPU:    &kubevirtv1.CPU{Cores: cores},
		Memory: &kubevirtv1.Memory{Guest: &guest},
	}}}
	vmi.Spec.Domain.Devices.LogSerialConsole = &console
	return vmi
}

// WorkerPrice is the price of one worker VM (WorkerVMI): the requests of the launcher Pod the
// sim's KubeVirt makes for it (kubevirt.LauncherPod), summed as kube-scheduler's NodeResourcesFit
// does (k8s.io/component-helpers resource.PodRequests, which kubernetes v1.35.4
// pkg/scheduler/framework/plugins/noderesources/fit.go:293-302 calls): containers, plus
// restartable init containers (sidecars). This is the one place the sim's per-worker price is
// made; a launcher made otherwise (the real virt-controller's template) changes it here.
func WorkerPrice(cores uint32, guest resource.Quantity, console bool) Price {
	req := resourcehelper.PodRequests(kubevirt.LauncherPod(WorkerVMI(cores, guest, console)), resourcehelper.PodResourcesOptions{})
	return Price{Memory: req[corev1.ResourceMemory], CPU: req[corev1.ResourceCPU]}
}

// Limit is how many workers one Node holds at worst, and of what it runs out first.
type Limit struct {
	Workers int
	// Node is the Node that holds the fewest, Resource what it runs out of (memory, cpu, pods).
	Node, Resource string
	// Why is the arithmetic in words: "Node sim-worker-1: 8 cpu / 110m = 72".
	Why string
}

// Most is how many workers of price p one Node of nodes holds at worst. A worker's disk binds
// on first consumer to the Node its temporary launcher landed on, and its launcher must follow
// it there (CDI's WaitForFirstConsumer binding, KubeVirt's temporary launcher: kubevirt/kubevirt
// v1.8.4 pkg/virt-controller/services/template.go:545-548), so any one Node may end up with
// every worker at once: the least of the Nodes decides, by memory, cpu or pods, whichever runs
// out first.
func Most(nodes []world.NodeSpec, p Price) Limit {
	l := Limit{Workers: -1}
	for _, n := range nodes {
		mem, cpu := resource.MustParse(n.Memory), resource.MustParse(n.CPU)
		for _, r := range []struct {
			name      string
			have, per int64
			say       string
		}{
			{"memory", mem.Value(), p.Memory.Value(), fmt.Sprintf("%s memory / %s", n.Memory, mi(p.Memory))},
			{"cpu", cpu.MilliValue(), p.CPU.MilliValue(), fmt.Sprintf("%s cpu / %s", n.CPU, p.CPU.String())},
			{"pods", int64(n.Pods), 1, fmt.Sprintf("%d pods", n.Pods)},
		} {
			if r.per <= 0 {
				continue
			}
			if k := int(r.have / r.per); l.Workers < 0 || k < l.Workers {
				l = Limit{Workers: k, Node: n.Name, Resource: r.name, Why: fmt.Sprintf("Node %s: %s = %d", n.Name, r.say, k)}
			}
		}
	}
	l.Workers = max(l.Workers, 0)
	return l
}

// Describe says the Nodes in a few words: "3 Nodes of 8 cpu, 320Gi memory and 110 pods".
func Describe(nodes []world.NodeSpec) string {
	seen := map[string]int{}
	var order []string
	for _, n := range nodes {
		k := fmt.Sprintf("%s cpu, %s memory and %d pods", n.CPU, n.Memory, n.Pods)
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d Nodes of %s", seen[k], k)
	}
	return strings.Join(parts, ", ")
}

func mi(q resource.Quantity) string { return fmt.Sprintf("%dMi", (q.Value()+(1<<20)-1)>>20) }
