// Package join follows a worker pool from its bootstrap template to a pod running on each of
// its Nodes, one stage at a time, and fails early and precisely when a stage cannot be reached.
package join

import (
	"fmt"
	"time"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// Stage is one step of a pool's join, in the order a healthy pool passes them.
type Stage string

const (
	StageBootstrapTemplate Stage = "bootstrap-template" // TalosConfigTemplate / KairosConfigTemplate exists
	StageBootstrapData     Stage = "bootstrap-data"     // Machines exist and carry bootstrap data
	StageDiskImport        Stage = "disk-import"        // the system disk DataVolume imported
	StageVMIRunning        Stage = "vmi-running"        // the VMI runs in its virt-launcher
	StageGuestBoot         Stage = "guest-boot"         // the guest console shows the OS booting
	StageJoin              Stage = "join"               // the guest's kubelet/kubeadm joins the tenant
	StageNodeRegistered    Stage = "node-registered"    // a tenant Node named like the VMI exists
	StageProviderID        Stage = "provider-id"        // Node.spec.providerID == kubevirt://<vmi>
	StageNodeRef           Stage = "node-ref"           // Machine.status.nodeRef + Node annotations
	StageReady             Stage = "ready"              // Node Ready
	StageSchedulable       Stage = "schedulable"        // no NoSchedule/NoExecute taint, not cordoned
	StageWorkloadPod       Stage = "workload-pod"       // a pinned pod runs on that very node
)

// Stages lists every stage in join order.
func Stages() []Stage {
	return []Stage{
		StageBootstrapTemplate, StageBootstrapData, StageDiskImport, StageVMIRunning, StageGuestBoot,
		StageJoin, StageNodeRegistered, StageProviderID, StageNodeRef, StageReady, StageSchedulable,
		StageWorkloadPod,
	}
}

// Index is the stage's position in join order, or -1 when it is not a stage.
func (s Stage) Index() int {
	for i, st := range Stages() {
		if st == s {
			return i
		}
	}
	return -1
}

// Progress is a pool's position, reported on every change.
type Progress struct {
	Pool   string
	Stage  Stage
	Detail string // "DataVolume 42% (importer restarts: 1)"
	Since  time.Time
}

// StageError is a join that cannot finish: a terminal state seen by a detector, or the budget
// running out (Class verdict.Deadline) while the pool was at Stage.
type StageError struct {
	Pool     string
	Stage    Stage
	Class    verdict.Class
	Detail   string
	Elapsed  time.Duration // how long the pool had been at Stage
	Budget   time.Duration // the wait's whole budget
	Evidence []string      // artifact paths that explain it, relative to the artifacts folder
	// At is when the join decided (the detector saw the terminal state, or the budget ran
	// out); a report written later keeps this time.
	At time.Time
}

func (e *StageError) Error() string {
	if e.Class == verdict.Deadline && e.Budget <= 0 {
		return fmt.Sprintf("pool %s: the phase's time had run out before its join was followed (last seen at %s: %s)", e.Pool, e.Stage, e.Detail)
	}
	if e.Class == verdict.Deadline {
		return fmt.Sprintf("pool %s: stuck at %s for %s of %s: %s", e.Pool, e.Stage,
			e.Elapsed.Round(time.Second), e.Budget.Round(time.Second), e.Detail)
	}
	return fmt.Sprintf("pool %s: %s: %s", e.Pool, verdict.Label(e.Class, string(e.Stage)), e.Detail)
}
