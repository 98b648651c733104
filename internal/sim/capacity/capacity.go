// Package capacity is what the sim's management cluster holds of a lane's worker VMs: the
// Nodes the sim plays (world.DefaultNodes) and the price of one worker on them, its
// virt-launcher Pod's requests as the sim's KubeVirt makes the Pod and as the real
// kube-scheduler adds them up. The lane check asks it, so a sim lane the check accepts never
// goes red for capacity, and one that cannot fit is refused before any phase.
package capacity

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cozystack/cozy-e2e/internal/sim/world"
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

// WorkerPrice is the price of one worker VM (cores vCPUs and guest memory, as CAPK makes its VMI from the chart's KubevirtMachineTemplate: nodeGroups.<pool>.resources; the console log container when the pool asks for it): the requests of the virt-launcher Pod
// the real virt-controller v1.8.4 makes for it, summed as kube-scheduler's NodeResourcesFit does
// (containers plus restartable init containers: k8s.io/component-helpers resource.PodRequests,
// which kubernetes v1.35.4 pkg/scheduler/framework/plugins/noderesources/fit.go:293-302 calls).
// The lane check runs before any tool is built, so the price is KubeVirt's arithmetic written
// out here; TestVirtController (internal/sim/realupstream) holds it to the launcher the real
// virt-controller makes.
//
// The compute container asks for the guest's memory and the KVM backend's overhead
// (kubevirt/kubevirt v1.8.4 pkg/hypervisor/kvm/hypervisorbackend.go GetMemoryOverhead: page
// tables of one 512th of the memory request, 220Mi for virt-launcher-monitor, virt-launcher,
// virtlogd, virtqemud and QEMU, 8Mi per vCPU, 8Mi for the IO thread, 32Mi of video RAM when a
// graphics device is attached by default), and the vCPUs divided by the cluster's
// cpuAllocationRatio (10 on the platform). The guest-console-log container, when the VM logs its
// console, asks for 35M and 5m (pkg/virt-controller/services/serialconsolelog.go lines 66-89).
func WorkerPrice(cores uint32, guest resource.Quantity, console bool) Price {
	vcpus := int64(max(cores, 1))
	pagetables := resource.NewScaledQuantity(guest.ScaledValue(resource.Kilo), resource.Kilo).Value() / 512
	overhead := pagetables + (220+8*vcpus+8+32)<<20
	mem := *resource.NewQuantity(guest.Value()+overhead, resource.BinarySI)
	cpu := *resource.NewMilliQuantity(vcpus*1000/CPUAllocationRatio, resource.DecimalSI)
	if console {
		mem.Add(resource.MustParse("35M"))
		cpu.Add(resource.MustParse("5m"))
	}
	return Price{Memory: mem, CPU: cpu}
}

// CPUAllocationRatio is the platform's KubeVirt CPU allocation ratio (Cozystack v1.6.1
// packages/core/platform/values.yaml line 498, resources.cpuAllocationRatio), which
// virt-controller divides a VM's vCPUs by for its launcher's CPU request.
const CPUAllocationRatio = 10

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
