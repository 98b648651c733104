// Package kubevirt stands in for KubeVirt v1.8 (kubevirt.io/v1): the VirtualMachine controller
// (DataVolumes from dataVolumeTemplates, then the VirtualMachineInstance, printableStatus and
// conditions) and virt-controller/virt-handler for a VMI (the virt-launcher Pod
// virt-launcher-<vmi>-<rand> with container compute and, when logSerialConsole is on, the native
// sidecar guest-console-log whose log is the serial console; phases Pending, Scheduling,
// Scheduled, Running; conditions PodScheduled, Ready, LiveMigratable). The launcher requests the
// VM's memory plus KubeVirt's overhead, so the real scheduler places it on a management node or
// says why not. A deleted VMI shuts its guest down before its launcher goes.
package kubevirt

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
)

// Names KubeVirt uses.
const (
	LabelApp       = "kubevirt.io"
	LabelCreatedBy = "kubevirt.io/created-by"
	LabelDomain    = "kubevirt.io/domain"
	// AnnEphemeralProvisioning marks the temporary launcher of a volume waiting for its first
	// consumer (kubevirt.io/api core/v1 EphemeralProvisioningObject).
	AnnEphemeralProvisioning = "kubevirt.io/ephemeral-provisioning"
	LauncherApp              = "virt-launcher"
	ComputeContainer         = "compute"
	ConsoleContainer         = "guest-console-log"
	VMFinalizer              = "kubevirt.io/virtualMachineControllerFinalize"
	VMIFinalizer             = "foregroundDeleteVirtualMachine"
	LauncherImage            = "quay.io/kubevirt/virt-launcher:v1.8.4"
	cpuAllocationRatio       = 10
)

// Latency names this package reads from simenv.Env.
const (
	// LatencyStart is from the launcher running to the VMI Running (virt-handler starting the domain).
	LatencyStart = "vm-start"
	// LatencyShutdown is from a VMI's deletion to its launcher's (the guest's ACPI shutdown).
	LatencyShutdown = "shutdown"
)

// Setup registers the VirtualMachine and VirtualMachineInstance reconcilers on mgr.
func Setup(mgr manager.Manager, env *simenv.Env) error {
	if err := setupVM(mgr, env); err != nil {
		return err
	}
	return setupVMI(mgr, env)
}

func since(env *simenv.Env, t time.Time) time.Duration { return env.Now().Sub(t) }
