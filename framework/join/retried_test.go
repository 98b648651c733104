package join

import (
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// States upstream moves on from are suspects, never failures: the pool waits where it stands,
// and the suspect quotes upstream's words for the deadline failure. Each case breaks a joined
// worker the way its controller shows the state.
func TestStatesUpstreamMovesOnFromAreSuspects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		os      string
		stage   Stage
		class   verdict.Class
		suspect string
		break_  func(v *machineView)
	}{
		// kairos-io/provider-kubeadm v4.10.0 scripts/kube-join.sh:74-82: reset, 10 s, join again.
		{"a kubeadm error on a Kairos console", osfamily.Kairos, StageJoin, verdict.JoinRejected,
			"failed join attempt(s), the last: error execution phase preflight: couldn't validate the identity of the API Server", func(v *machineView) {
				v.Node = nil
				v.Console.Joined, v.Console.Last = false, "retrying in 10s"
				v.Console.Refused = "error execution phase preflight: couldn't validate the identity of the API Server: Get \"https://10.0.0.1:6443/api/v1/namespaces/kube-public/configmaps/cluster-info?timeout=10s\": dial tcp 10.0.0.1:6443: connect: connection refused"
			}},
		// CDI v1.64.0 controller-base.go:959-963: Failed while the claim is Lost, recomputed;
		// the Bound condition of a lost claim, conditions.go:147-149.
		{"a DataVolume Failed on a lost claim", osfamily.Talos, StageDiskImport, verdict.DiskImport,
			"DataVolume m1-disk-system Failed: Bound ClaimLost: Claim Lost", func(v *machineView) {
				v.DataVolume.Status.Phase = cdiv1.Failed
				v.DataVolume.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeBound, Status: corev1.ConditionFalse,
					Reason: "ClaimLost", Message: "Claim Lost"}, {Type: cdiv1.DataVolumeReady, Status: corev1.ConditionFalse}}
			}},
		// CDI v1.64.0 controller-base.go:314-336: it reconciles again on StorageProfile changes.
		{"a claim CDI does not render yet", osfamily.Kairos, StageDiskImport, verdict.DiskImport,
			"CDI renders no claim yet: ErrClaimNotValid: no accessMode specified in StorageProfile local", func(v *machineView) {
				v.DataVolume.Status.Phase = ""
				v.DataVolume.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeBound, Status: corev1.ConditionFalse,
					Reason: "ErrClaimNotValid", Message: "no accessMode specified in StorageProfile local"}}
			}},
		// k8s v1.35.4 node_lifecycle_controller.go:87-113,540-590: off when the condition clears.
		{"memory pressure", osfamily.Talos, StageSchedulable, verdict.NotSchedulable,
			"tainted node.kubernetes.io/memory-pressure:NoSchedule (MemoryPressure=True KubeletHasInsufficientMemory: kubelet has insufficient memory available)", func(v *machineView) {
				pressure(v, corev1.TaintNodeMemoryPressure, corev1.NodeMemoryPressure, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available")
			}},
		{"disk pressure", osfamily.Talos, StageSchedulable, verdict.NotSchedulable,
			"tainted node.kubernetes.io/disk-pressure:NoSchedule (DiskPressure=True KubeletHasDiskPressure: kubelet has disk pressure)", func(v *machineView) {
				pressure(v, corev1.TaintNodeDiskPressure, corev1.NodeDiskPressure, "KubeletHasDiskPressure", "kubelet has disk pressure")
			}},
		{"pid pressure", osfamily.Kairos, StageSchedulable, verdict.NotSchedulable,
			"tainted node.kubernetes.io/pid-pressure:NoSchedule (PIDPressure=True KubeletHasInsufficientPID: kubelet has insufficient PID available)", func(v *machineView) {
				pressure(v, corev1.TaintNodePIDPressure, corev1.NodePIDPressure, "KubeletHasInsufficientPID", "kubelet has insufficient PID available")
			}},
		{"a Succeeded VMI under runStrategy Always", osfamily.Talos, StageVMIRunning, verdict.VMFailed,
			"VMI m1 Succeeded; VirtualMachine m1 (runStrategy Always) replaces it", func(v *machineView) {
				v.VMI.Status.Phase = kubevirtv1.Succeeded
				v.VM = vmWith(v.vmName(), kubevirtv1.RunStrategyAlways)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPool(tc.os, 1)
			v := joined(p, "m1")
			s := withTemplate(p, v)
			s.KubeletConfig = kubeletConfig("clusterDNS: [10.95.0.10]\n")
			s.ClusterDNSService = &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.95.0.10"}}
			tc.break_(v)
			out := evaluate(s)
			if out.Terminal != nil {
				t.Fatalf("upstream moves on from it; the join ended: %s at %s: %s", out.Terminal.Class, out.Terminal.Stage, out.Terminal.Detail)
			}
			if out.Done || out.Stage != tc.stage {
				t.Errorf("the pool is at %s (done %v): %s; want it waiting at %s", out.Stage, out.Done, out.Detail, tc.stage)
			}
			var got []string
			for _, x := range out.Suspects {
				if x.Class == tc.class && x.Stage == tc.stage && strings.Contains(x.Detail, tc.suspect) {
					return
				}
				got = append(got, x.String())
			}
			t.Errorf("no suspect %s at %s saying %q; suspects: %q", tc.class, tc.stage, tc.suspect, got)
		})
	}
}

// pressure makes v's Node report condition cond True and carry the NoSchedule taint key the node
// lifecycle controller puts on for it.
func pressure(v *machineView, key string, cond corev1.NodeConditionType, reason, msg string) {
	v.Node.Status.Conditions = append(v.Node.Status.Conditions, corev1.NodeCondition{Type: cond, Status: corev1.ConditionTrue,
		Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC))})
	v.Node.Spec.Taints = []corev1.Taint{{Key: key, Effect: corev1.TaintEffectNoSchedule}}
	v.Workload = nil
}

// A failed kubeadm join clears once the guest joined: its kubelet's CSR approved.
func TestAKubeadmErrorClearsOnceTheGuestJoined(t *testing.T) {
	p := testPool(osfamily.Kairos, 1)
	v := joined(p, "m1")
	v.Node, v.Console.Joined, v.Console.Refused = nil, false, "error execution phase kubelet-start: timed out waiting for the condition"
	v.CSRs = []certificatesv1.CertificateSigningRequest{{ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Username: "system:node:metal-1a2b", SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}}}}
	s := withTemplate(p, v)
	s.KubeletConfig = kubeletConfig("clusterDNS: [10.95.0.10]\n")
	out := evaluate(s)
	if out.Terminal != nil || out.Stage != StageNodeRegistered {
		t.Fatalf("the tenant approved its kubelet: want node-registered, got %s %+v", out.Stage, out.Terminal)
	}
	for _, x := range out.Suspects {
		if x.Class == verdict.JoinRejected {
			t.Errorf("the guest joined; the suspect stays: %s", x)
		}
	}
}

// A DataVolume Failed while the importer's own cause is seen, the registry's refusal, is final:
// the cause, not the phase, decides.
func TestAFailedDataVolumeWithTheRegistrysRefusalIsFinal(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	v := joined(p, "m1")
	v.DataVolume.Status.Phase = cdiv1.Failed
	v.DataVolume.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: "Error",
		Message: "Unable to process data: initializing source: reading manifest: 401 Unauthorized"}}
	out := evaluate(withTemplate(p, v))
	if out.Terminal == nil || out.Terminal.Class != verdict.DiskImport || !strings.Contains(out.Terminal.Detail, "refused by the registry") {
		t.Fatalf("want disk-import for the registry's refusal, got %+v", out.Terminal)
	}
}

// A Succeeded VMI (its guest shut down) that its VM does not start again is final at once: under
// RerunOnFailure, Halted, Once and Manual KubeVirt starts no new VMI for it (kubevirt v1.8.4
// pkg/virt-controller/watch/vm/vm.go:1038-1149), and CAPK calls it "a permanent finalized state".
func TestASucceededVMINothingRestartsIsFinal(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	for _, rs := range []kubevirtv1.VirtualMachineRunStrategy{kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyHalted,
		kubevirtv1.RunStrategyOnce, kubevirtv1.RunStrategyManual} {
		v := joined(p, "m1")
		v.Node, v.Console.Joined = nil, false
		v.VMI.Status.Phase = kubevirtv1.Succeeded
		v.VM = vmWith(v.vmName(), rs)
		out := evaluate(withTemplate(p, v))
		want := "VMI m1 Succeeded, and VirtualMachine m1 with runStrategy " + string(rs) + " does not start it again"
		if out.Terminal == nil || out.Terminal.Class != verdict.VMFailed || out.Terminal.Stage != StageVMIRunning || !strings.Contains(out.Terminal.Detail, want) {
			t.Errorf("runStrategy %s: want vm-failed at vmi-running saying %q, got %+v (waiting at %s: %s)", rs, want, out.Terminal, out.Stage, out.Detail)
		}
	}
}
