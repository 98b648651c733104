// Package kubevirt stands in for KubeVirt's virt-handler (and the virt-launcher and domain it
// drives) on the sim's management Nodes. The real virt-controller v1.8.4 runs beside it
// (internal/sim/realupstream): it owns VirtualMachines and VirtualMachineInstances, creates the
// virt-launcher Pods from its own template, the WaitForFirstConsumer temporary pods, moves a VMI
// up to Scheduled, keeps the VM's status and start-failure backoff and replaces failed or
// deleted VMIs. What needs a node and a hypervisor stays here, each line citing what it imitates
// in kubevirt/kubevirt v1.8.4:
//
//   - the Node side (nodes.go): the heartbeat, the kubevirt.io/schedulable label and the
//     extended resources of its device plugins, which virt-controller schedules launchers by;
//   - the domain (handler.go): a Scheduled VMI whose launcher runs (kwok runs the Pod) is marked
//     Running, with the interfaces virt-handler reports without a guest agent; a domain that
//     crashes (faults vmi-crash-once, vmi-crashloop) fails its VMI.
//
// The console stream is served by the sim substrate's virt-api stand-in from the guest's serial
// port (simenv.SerialPorts); the guest stand-in (internal/sim/guest) writes it.
package kubevirt

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// Names of KubeVirt's the stand-ins read.
const (
	// ComputeContainer and ConsoleContainer are the launcher's containers: compute runs the
	// domain, guest-console-log (a native sidecar, only when the serial console log is on)
	// tails its serial console (pkg/virt-controller/services/template.go,
	// serialconsolelog.go).
	ComputeContainer = "compute"
	ConsoleContainer = "guest-console-log"
)

// Latency names this package reads from simenv.Env.
const (
	// LatencyStart is from the launcher running to the domain started (the VMI Running).
	LatencyStart = "vm-start"
	// LatencyCrash is how long a domain runs before it crashes under vmi-crash-once.
	LatencyCrash = "vm-crash"
)

// Setup registers virt-handler's stand-in on mgr: the management Nodes' heartbeat and the
// domains of the VMIs scheduled to them.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	if err := setupNodes(mgr, env); err != nil {
		return err
	}
	return setupHandler(mgr, env)
}
