// Package join follows a worker pool from its bootstrap template to a pod running on each of
// its Nodes, one stage at a time, and fails early and precisely when a stage cannot be reached.
//
// Final and suspect. Every change of a watched object runs the detectors on the pool's objects.
// A detector ends the wait (a *StageError of the state's class) only on a final state, one of:
// upstream's own word that the state is terminal (a phase or reason upstream never leaves, an
// API comment that says so, a controller that stops reconciling); a state that outlived
// upstream's own retry, the retry named and cited; or a state no retry can change (the API
// refused the object, a class the pool names does not exist). docs/signals.md names which, with
// the upstream line, in its "final because" column, and test/signals fails for a class without
// one. Anything else a detector sees is a Suspect: Progress carries it the moment it appears,
// the join logs its appearance and its clearing, and a deadline failure names the suspects that
// were still there (StageError.Suspects). A suspect never fails a pool by itself. A detector
// that judges a state returns a *terminal for a final one and a *Suspect otherwise; the join
// does the bookkeeping (suspects).
package join

import (
	"fmt"
	"strings"
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
	// Suspects are the states that would fail the pool were they final, oldest first.
	Suspects []Suspect
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
	// Suspects are the suspects the pool still had when it failed: for a deadline, what most
	// likely held it.
	Suspects []Suspect
	// Platform names the platform components that were unavailable when the wait ran out
	// (Class verdict.Platform).
	Platform []string
}

func (e *StageError) Error() string {
	if e.Class == verdict.Deadline && e.Budget <= 0 {
		return fmt.Sprintf("pool %s: the phase's time had run out before its join was followed (last seen at %s: %s)", e.Pool, e.Stage, e.Detail)
	}
	if e.Class == verdict.Platform {
		return fmt.Sprintf("pool %s: stuck at %s for %s of %s: %s (the pool stood at: %s)", e.Pool, e.Stage,
			e.Elapsed.Round(time.Second), e.Budget.Round(time.Second), strings.Join(e.Platform, "; "), e.Detail)
	}
	if e.Class == verdict.Deadline {
		s := fmt.Sprintf("pool %s: stuck at %s for %s of %s: %s", e.Pool, e.Stage,
			e.Elapsed.Round(time.Second), e.Budget.Round(time.Second), e.Detail)
		if len(e.Suspects) > 0 {
			s += "; " + suspectsLine(e.Suspects)
		}
		return s
	}
	return fmt.Sprintf("pool %s: %s: %s", e.Pool, verdict.Label(e.Class, string(e.Stage)), e.Detail)
}

// Judgement is the class, stage and evidence the join decided, and when (verdict.Judge).
func (e *StageError) Judgement() verdict.Judgement {
	return verdict.Judgement{Class: e.Class, Stage: string(e.Stage), Evidence: e.Evidence, At: e.At}
}
