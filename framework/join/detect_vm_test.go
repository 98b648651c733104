package join

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
)

// simNodes are three management Nodes of 32Gi, labelled for KubeVirt as virt-handler labels them.
func simNodes() []corev1.Node {
	var out []corev1.Node
	for _, n := range []string{"w1", "w2", "w3"} {
		out = append(out, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{kubevirtv1.NodeSchedulable: "true"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourceCPU: resource.MustParse("8")}}})
	}
	return out
}

// unplaceableLauncher makes pod a launcher asking for memory that the scheduler could not place.
func unplaceableLauncher(v *machineView, pod *corev1.Pod, memory string) {
	v.ManagementNodes = simNodes()
	pod.Spec.NodeSelector = map[string]string{kubevirtv1.NodeSchedulable: "true"}
	pod.Spec.Containers = []corev1.Container{{Name: "compute", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}}}}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient memory."}}}
}

func vmWith(name string, rs kubevirtv1.VirtualMachineRunStrategy) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &rs}}
}

// crashLooping is a VM as KubeVirt shows it while it backs off after fails start failures.
func crashLooping(name string, fails int) *kubevirtv1.VirtualMachine {
	vm := vmWith(name, kubevirtv1.RunStrategyAlways)
	vm.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusCrashLoopBackOff
	vm.Status.StartFailure = &kubevirtv1.VirtualMachineStartFailure{ConsecutiveFailCount: fails, LastFailedVMIUID: "uid-2",
		RetryAfterTimestamp: &metav1.Time{}}
	vm.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse,
		Reason: "VMINotExists", Message: "VMI does not exist"}}
	return vm
}

// What upstream retries or repairs on its own is a suspect, shown with the pool's detail and
// never a failure: a Failed VMI its VM replaces (runStrategy Always, as Cozystack's chart
// renders workers), a first start failure KubeVirt backs off from, a launcher the scheduler
// could place on a Node once other pods go.
func TestStatesUpstreamRetriesAreSuspectsNotFailures(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	for _, tc := range []struct {
		name, suspect string
		break_        func(v *machineView)
	}{
		{"a Failed VMI under runStrategy Always", "VMI m1 Failed; VirtualMachine m1 (runStrategy Always) replaces it", func(v *machineView) {
			v.VMI.Status.Phase = kubevirtv1.Failed
			v.VM = vmWith("m1", kubevirtv1.RunStrategyAlways)
		}},
		{"a Failed VMI whose VM is not seen yet", "no VirtualMachine m1 seen", func(v *machineView) {
			v.VMI.Status.Phase = kubevirtv1.Failed
		}},
		{"a first start failure", "CrashLoopBackOff (1 consecutive start failure(s)", func(v *machineView) {
			v.VMI = nil
			v.VM = crashLooping("m1", 1)
		}},
		{"a launcher that fits a Node once others go", "cannot be placed: 0/3 nodes are available: 3 Insufficient memory.", func(v *machineView) {
			v.VMI.Status.Phase = kubevirtv1.Scheduling
			unplaceableLauncher(v, v.Launcher, "8Gi")
		}},
		{"a launcher no Node is labelled for yet", "no Node is labelled for it yet", func(v *machineView) {
			v.VMI.Status.Phase = kubevirtv1.Scheduling
			unplaceableLauncher(v, v.Launcher, "64Gi")
			for i := range v.ManagementNodes {
				v.ManagementNodes[i].Labels = nil
			}
		}},
	} {
		v := joined(p, "m1")
		v.Node, v.Workload = nil, nil
		tc.break_(v)
		out := evaluate(withTemplate(p, v))
		if out.Terminal != nil {
			t.Errorf("%s: terminal %s: %s", tc.name, out.Terminal.Class, out.Terminal.Detail)
			continue
		}
		if got := suspectsLine(out.Suspects); !strings.Contains(got, tc.suspect) {
			t.Errorf("%s: suspects %q; want one with %q", tc.name, got, tc.suspect)
		}
	}
}

// The replacement VMI is followed: once the VM's new VMI runs, the pool moves on and the suspect
// of the failed one is gone.
func TestAReplacedVMIIsFollowedAndItsSuspectCleared(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	v := joined(p, "m1")
	v.VM = vmWith("m1", kubevirtv1.RunStrategyAlways)
	v.VMI.UID, v.VMI.Status.Phase = "uid-1", kubevirtv1.Failed
	v.Node, v.Workload = nil, nil
	if out := evaluate(withTemplate(p, v)); out.Terminal != nil || len(out.Suspects) == 0 {
		t.Fatalf("failed VMI: %+v", out)
	}
	v.VMI = v.VMI.DeepCopy()
	v.VMI.UID, v.VMI.Status.Phase = "uid-2", kubevirtv1.Running
	out := evaluate(withTemplate(p, v))
	if out.Terminal != nil || len(out.Suspects) != 0 || out.Stage.Index() <= StageVMIRunning.Index() {
		t.Fatalf("replacement VMI running: %+v", out)
	}
}

// The crash loop's failure quotes the VM's own status: its printable status, start failures,
// next start and conditions.
func TestACrashLoopQuotesTheVMsStatus(t *testing.T) {
	p := testPool(osfamily.Talos, 1)
	v := joined(p, "m1")
	v.VMI = nil
	v.VM = crashLooping("m1", 3)
	out := evaluate(withTemplate(p, v))
	if out.Terminal == nil {
		t.Fatalf("not terminal: %+v", out)
	}
	for _, want := range []string{"CrashLoopBackOff", "3 consecutive start failure(s)", "uid-2", "next start at", "Ready=False VMINotExists: VMI does not exist"} {
		if !strings.Contains(out.Terminal.Detail, want) {
			t.Errorf("detail %q lacks %q", out.Terminal.Detail, want)
		}
	}
}
