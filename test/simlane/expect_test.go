package simlane

import (
	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/verdict"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/lifecycle"
	"github.com/cozystack/cozy-e2e/suites/suiterun"
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
	// tenant faults fail the tenant's deletion, not a pool: their failure names no pool.
	tenant bool
}

// expect is what fault f must bring about on a pool of OS family os; false for the faults a
// correct harness absorbs. The sim says what it does; what that must be judged is the harness's
// contract, and it lives here.
func expect(f faults.Name, os string) (expectation, bool) {
	switch f {
	case faults.DiskImportRefused:
		return expectation{verdict.DiskImport, join.StageDiskImport, true, []string{"401"}, false}, true
	case faults.DiskImportStall:
		// The DataVolume's progress as the real cdi-controller reads it from the importer's
		// metrics port (served on the pod's IP by the sim's pod network).
		return expectation{verdict.Deadline, join.StageDiskImport, false, []string{"3.14%"}, false}, true
	case faults.VMIUnschedulable:
		return expectation{verdict.VMUnschedulable, join.StageVMIRunning, true, []string{"Insufficient memory"}, false}, true
	case faults.VMICrashLoop:
		// KubeVirt backs off and retries forever; the harness stops at its second start failure,
		// and the failure quotes the VM's own status.
		return expectation{verdict.VMFailed, join.StageVMIRunning, true, []string{"CrashLoopBackOff"}, false}, true
	case faults.GuestJoinRejected:
		if os == osfamily.Kairos {
			// kubeadm says so on the console, but Kairos's kubeadm provider joins again 10 s
			// after each failure (kairos-io/provider-kubeadm v4.10.0 scripts/kube-join.sh:74-82):
			// a suspect until the deadline, which names it; the console shows the line.
			return expectation{verdict.Deadline, join.StageJoin, false, []string{"error execution phase"}, false}, true
		}
		// A Talos console shows machined's line for the kubelet that exited, its last words in
		// it, and machined starts it again 5 s later, forever: a suspect until the deadline,
		// which names it; no CSR was made.
		return expectation{verdict.Deadline, join.StageJoin, false, []string{"going to restart forever", "Unauthorized", "0 CertificateSigningRequest(s)"}, false}, true
	case faults.GuestCAWrong:
		// The real kubelet cannot verify the apiserver: it retries in the background and never
		// exits (the apiserver never answers it), and a Talos console shows nothing of it. The
		// join runs out of time with no CSR.
		return expectation{verdict.Deadline, join.StageJoin, false, []string{"0 CertificateSigningRequest(s)"}, false}, true
	case faults.GuestEndpointUnreachable:
		// As with the wrong CA: no answer, so the kubelet never exits and the console is silent.
		return expectation{verdict.Deadline, join.StageJoin, false, []string{"0 CertificateSigningRequest(s)"}, false}, true
	case faults.GuestTokenExpired:
		// The apiserver answers 401: five minutes after its start the real kubelet exits, and
		// machined's console line, with its last log line, is a suspect until the deadline,
		// which names it.
		return expectation{verdict.Deadline, join.StageJoin, false, []string{"going to restart forever",
			"No valid client certificate is found and the server is responsive", "0 CertificateSigningRequest(s)"}, false}, true
	case faults.ProviderIDMissing:
		if os == osfamily.Kairos {
			// Its provider patches the providerID on after registration: a suspect until the
			// deadline, which names it.
			return expectation{verdict.Deadline, join.StageProviderID, false, []string{"MISMATCH"}, false}, true
		}
		return expectation{verdict.Identity, join.StageProviderID, true, []string{"MISMATCH"}, false}, true
	case faults.ControllerCrashLoop:
		// virt-controller down from the first VirtualMachine on: the disks wait for their first
		// consumer, the launcher it never makes; at the pools deadline every pool names it and
		// its last log line, with the platform's class; the evidence holds the kubelet's BackOff
		// on virt-controller's Pod.
		return expectation{verdict.Platform, join.StageDiskImport, false, []string{"Back-off restarting failed container virt-controller"}, false}, true
	case faults.NodeNotReady:
		return expectation{verdict.Deadline, join.StageReady, false, []string{"KubeletNotReady"}, false}, true
	case faults.NodeTainted:
		return expectation{verdict.NotSchedulable, join.StageSchedulable, true, []string{"NoSchedule"}, false}, true
	case faults.KairosConfigRefused:
		return expectation{verdict.Bootstrap, join.StageBootstrapData, true, []string{"BootstrapTemplateCloningFailed"}, false}, true
	case faults.ClusterDNSMismatch:
		return expectation{verdict.ClusterDNS, join.StageJoin, true, []string{"clusterDNS is not the tenant CoreDNS Service's address"}, false}, true
	case faults.MHCBlocked:
		// The MachineHealthCheck counts the broken worker among too many unhealthy ones: it
		// marks nothing and remediates nothing.
		return expectation{verdict.Remediation, suiterun.StageMarkedUnhealthy, true, []string{"TooManyUnhealthy"}, false}, true
	case faults.ScaleDownStuck:
		return expectation{verdict.Leak, suiterun.StageRemoved, true, []string{lifecycle.HeldFinalizer}, false}, true
	case faults.Leak:
		// The PVCs are the app's: the app's deletion is where they stay.
		return expectation{verdict.Leak, suiterun.StageAppGone, true, []string{lifecycle.HeldFinalizer}, true}, true
	}
	return expectation{}, false
}

// decisiveObservation is, for a fault the sim records more than once per object, the record from
// which its verdict is due: a crash loop is judged at one VM's second start failure (the
// harness's limit, framework/join crashLoopLimit), not at its first crash.
var decisiveObservation = map[faults.Name]int{faults.VMICrashLoop: 2}

// osOf is the OS family of each class a lane's pools name.
func osOf(l *lane.Lane) map[string]string {
	out := map[string]string{osfamily.Talos: osfamily.Talos, osfamily.Kairos: osfamily.Kairos}
	for _, c := range l.Classes {
		out[c.Name] = c.OS
	}
	return out
}
