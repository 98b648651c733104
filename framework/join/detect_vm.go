package join

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/verdict"
)

// crashLoopLimit is the number of consecutive start failures at which a VM in KubeVirt's
// CrashLoopBackOff is judged failed. KubeVirt never stops retrying: after each start failure
// (a VMI that went Failed without ever running) it waits its start-failure backoff, 10-15 s
// after the first, 40-60 s after the second, then count² × 10 s and up to 300 s, and starts a
// new VMI (kubevirt/kubevirt v1.8.4 pkg/virt-controller/watch/vm/vm.go lines 1476-1503 and
// 1574-1601), and shows printableStatus CrashLoopBackOff while it waits (lines 2557-2580). The
// second failure is KubeVirt's own retry failing the same way after its first backoff: that is
// where the harness stops waiting, as it stops at an importer's third restart.
const crashLoopLimit = 2

// vmState judges one Machine's VM layer (its VirtualMachine, current VMI and launchers, against
// the management Nodes): a terminal state, or a suspect (a state upstream retries or repairs
// on its own, shown but never failing the pool by itself), or neither.
func vmState(v *machineView) (*terminal, []Suspect) {
	name := v.vmName()
	if t := crashLoop(name, v.VM); t != nil {
		return t, nil
	}
	var found []Suspect
	if vm := v.VM; vm != nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusCrashLoopBackOff {
		found = append(found, Suspect{Class: verdict.VMFailed, Stage: StageVMIRunning, Object: "VirtualMachine/" + name,
			Detail: fmt.Sprintf("VirtualMachine %s CrashLoopBackOff (%s); KubeVirt starts it again when its backoff ends",
				name, startFailure(vm.Status.StartFailure))})
	}
	t, s := endedVMI(v)
	if t != nil {
		return t, found
	}
	if s != nil {
		found = append(found, *s)
	}
	for _, l := range []*corev1.Pod{v.Launcher, v.Temporary} {
		t, suspect := unplaceable(name, l, v.ManagementNodes)
		if t != nil {
			return t, nil
		}
		if suspect != nil {
			found = append(found, *suspect)
		}
	}
	return nil, found
}

// endedVMI judges a VMI in a final phase of its own (Failed, Succeeded) by whether its VM starts
// another: final when its run strategy does not, a suspect while it does or no VM is seen.
// A Failed VMI is started again under Always and RerunOnFailure; a Succeeded one (its guest
// shut down) under Always only: RerunOnFailure deletes it without a start request, Halted
// deletes it, Once and Manual leave it (kubevirt/kubevirt v1.8.4
// pkg/virt-controller/watch/vm/vm.go:978-1036 Always, :1038-1086 RerunOnFailure, :1087-1112
// Manual, :1114-1138 Halted, :1139-1149 Once), and CAPK v0.1.10 calls it "a permanent finalized
// state" under RerunOnFailure, Halted and Once (pkg/kubevirt/machine.go:152-170).
func endedVMI(v *machineView) (*terminal, *Suspect) {
	vmi, name := v.VMI, v.vmName()
	if vmi == nil || (vmi.Status.Phase != kubevirtv1.Failed && vmi.Status.Phase != kubevirtv1.Succeeded) {
		return nil, nil
	}
	phase := string(vmi.Status.Phase)
	rs, restarts := runStrategy(v.VM)
	if vmi.Status.Phase == kubevirtv1.Succeeded {
		restarts = rs == kubevirtv1.RunStrategyAlways
	}
	s := &Suspect{Class: verdict.VMFailed, Stage: StageVMIRunning, Object: "VirtualMachineInstance/" + name}
	switch {
	case v.VM == nil:
		// Not seen yet, or being deleted with its VM: nothing says the VMI will not come back.
		s.Detail = fmt.Sprintf("VMI %s %s%s; no VirtualMachine %s seen", name, phase, vmiReason(vmi), name)
	case !restarts:
		return &terminal{Class: verdict.VMFailed, Stage: StageVMIRunning,
			Detail: fmt.Sprintf("VMI %s %s%s, and VirtualMachine %s with runStrategy %s does not start it again (%s)",
				name, phase, vmiReason(vmi), name, rs, vmStatus(v.VM))}, nil
	default:
		s.Detail = fmt.Sprintf("VMI %s %s%s; VirtualMachine %s (runStrategy %s) replaces it", name, phase, vmiReason(vmi), name, rs)
	}
	return nil, s
}

// crashLoop is a VM whose starts keep failing: KubeVirt's CrashLoopBackOff at crashLoopLimit
// consecutive start failures, quoted from the VM's own status.
func crashLoop(name string, vm *kubevirtv1.VirtualMachine) *terminal {
	if vm == nil || vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusCrashLoopBackOff {
		return nil
	}
	sf := vm.Status.StartFailure
	if sf == nil || sf.ConsecutiveFailCount < crashLoopLimit {
		return nil
	}
	return &terminal{Class: verdict.VMFailed, Stage: StageVMIRunning,
		Detail: fmt.Sprintf("VirtualMachine %s is in CrashLoopBackOff: every start failed (%s; %s)", name, startFailure(sf), vmStatus(vm))}
}

// runStrategy is the VM's run strategy (spec.runStrategy, or the deprecated spec.running) and
// whether KubeVirt replaces a Failed VMI under it: Always and RerunOnFailure do
// (pkg/virt-controller/watch/vm/vm.go lines 978-1036 and 1038-1086), Halted, Manual and Once
// do not.
func runStrategy(vm *kubevirtv1.VirtualMachine) (kubevirtv1.VirtualMachineRunStrategy, bool) {
	if vm == nil {
		return "", false
	}
	rs := kubevirtv1.RunStrategyHalted
	switch {
	case vm.Spec.RunStrategy != nil:
		rs = *vm.Spec.RunStrategy
	case vm.Spec.Running != nil && *vm.Spec.Running:
		rs = kubevirtv1.RunStrategyAlways
	}
	return rs, rs == kubevirtv1.RunStrategyAlways || rs == kubevirtv1.RunStrategyRerunOnFailure
}

func startFailure(sf *kubevirtv1.VirtualMachineStartFailure) string {
	if sf == nil {
		return "no start failure recorded"
	}
	retry := "no retry time"
	if sf.RetryAfterTimestamp != nil {
		retry = "next start at " + sf.RetryAfterTimestamp.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%d consecutive start failure(s), the last of VMI UID %s, %s", sf.ConsecutiveFailCount, sf.LastFailedVMIUID, retry)
}

// vmStatus quotes what the VM says of itself: printableStatus and its conditions.
func vmStatus(vm *kubevirtv1.VirtualMachine) string {
	if vm == nil {
		return "no VirtualMachine"
	}
	parts := []string{"printableStatus " + orWord(string(vm.Status.PrintableStatus), "(none)")}
	for _, c := range vm.Status.Conditions {
		s := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" || c.Message != "" {
			s += " " + strings.TrimSpace(c.Reason+": "+c.Message)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func vmiReason(vmi *kubevirtv1.VirtualMachineInstance) string {
	if vmi.Status.Reason != "" {
		return " (" + vmi.Status.Reason + ")"
	}
	return ""
}

// unplaceable judges a launcher Pod the scheduler could not place (PodScheduled=False reason
// Unschedulable). The scheduler retries such a Pod whenever the cluster changes and at least
// every five minutes (k8s.io/kubernetes v1.35.4 pkg/scheduler/backend/queue/scheduling_queue.go,
// podMaxInUnschedulablePodsDuration), so it is a suspect, unless the Pod asks for more of a
// resource than any Node it may run on can allocate at all: then no retry places it while the
// Nodes stay as they are (fit.go: a request above the allocatable is Insufficient however many
// Pods go away; fit.go lines 649-726).
func unplaceable(vmName string, pod *corev1.Pod, nodes []corev1.Node) (*terminal, *Suspect) {
	if pod == nil {
		return nil, nil
	}
	var cond *corev1.PodCondition
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			cond = c
		}
	}
	if cond == nil {
		return nil, nil
	}
	what := fmt.Sprintf("launcher %s of VMI %s cannot be placed: %s", pod.Name, vmName, cond.Message)
	suspect := func(detail string) *Suspect {
		return &Suspect{Class: verdict.VMUnschedulable, Stage: StageVMIRunning, Object: "Pod/" + pod.Name,
			Since: cond.LastTransitionTime.Time, Detail: detail}
	}
	if !strings.Contains(cond.Message, insufficientPrefix) {
		return nil, suspect(what)
	}
	candidates := 0
	// What the scheduler counts the Pod as asking for (its containers, sidecars and init
	// containers together), by the function it uses (fit.go line 295).
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	names := make([]string, 0, len(requests))
	for n := range requests {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range nodes {
		if !selects(pod.Spec.NodeSelector, n.Labels) {
			continue
		}
		candidates++
	}
	if candidates == 0 {
		return nil, suspect(what + " (no Node is labelled for it yet)")
	}
	for _, name := range names {
		want := requests[corev1.ResourceName(name)]
		largest, fits := resource.Quantity{}, false
		for _, n := range nodes {
			if !selects(pod.Spec.NodeSelector, n.Labels) {
				continue
			}
			have := n.Status.Allocatable[corev1.ResourceName(name)]
			if have.Cmp(largest) > 0 {
				largest = have.DeepCopy()
			}
			if want.Cmp(have) <= 0 {
				fits = true
			}
		}
		if !fits {
			return &terminal{Class: verdict.VMUnschedulable, Stage: StageVMIRunning,
				Detail: fmt.Sprintf("%s; it asks for %s of %s and no Node it may run on has more than %s allocatable",
					what, want.String(), name, largest.String())}, nil
		}
	}
	return nil, suspect(what)
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
