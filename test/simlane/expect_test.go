package simlane

import (
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/sim/faults"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// expectation is the verdict a correct harness reaches on a pool a fault targets.
type expectation struct {
	class verdict.Class
	stage join.Stage
	// terminal faults are judged within seconds of becoming observable; the others at the
	// pools phase's deadline.
	terminal bool
	// explains are texts one of the failure's evidence files must hold ("console": a console
	// file with the guest's lines).
	explains []string
}

// expect is what fault f must bring about on a pool of OS family os; false for the faults a
// correct harness absorbs. The sim says what it does; what that must be judged is the harness's
// contract, and it lives here.
func expect(f faults.Name, os string) (expectation, bool) {
	switch f {
	case faults.DiskImportRefused:
		return expectation{verdict.DiskImport, join.StageDiskImport, true, []string{"401"}}, true
	case faults.DiskImportStall:
		return expectation{verdict.Deadline, join.StageDiskImport, false, []string{"3.14%"}}, true
	case faults.VMIUnschedulable:
		return expectation{verdict.VMUnschedulable, join.StageVMIRunning, true, []string{"Insufficient memory"}}, true
	case faults.GuestJoinRejected:
		if os == osfamily.Kairos {
			// kubeadm says so on the console.
			return expectation{verdict.JoinRejected, join.StageJoin, true, []string{"console"}}, true
		}
		// A Talos console says nothing of the kubelet: the join runs out of time, with no CSR.
		return expectation{verdict.Deadline, join.StageJoin, false, []string{"0 CertificateSigningRequest(s)"}}, true
	case faults.ProviderIDMissing:
		return expectation{verdict.Identity, join.StageProviderID, true, []string{"MISMATCH"}}, true
	case faults.NodeNotReady:
		return expectation{verdict.Deadline, join.StageReady, false, []string{"KubeletNotReady"}}, true
	case faults.NodeTainted:
		return expectation{verdict.NotSchedulable, join.StageSchedulable, true, []string{"NoSchedule"}}, true
	case faults.ClusterDNSMismatch:
		return expectation{verdict.ClusterDNS, join.StageJoin, true, []string{"clusterDNS is not the tenant CoreDNS Service's address"}}, true
	}
	return expectation{}, false
}

// osOf is the OS family of each class a lane's pools name.
func osOf(l *lane.Lane) map[string]string {
	out := map[string]string{osfamily.Talos: osfamily.Talos, osfamily.Kairos: osfamily.Kairos}
	for _, c := range l.Classes {
		out[c.Name] = c.OS
	}
	return out
}
