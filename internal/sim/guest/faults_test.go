package guest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/kubevirt"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// Each pool-scoped fault shows exactly its catalogue effect through the API, and the sim records
// the moment it became observable.
func TestFaultsShowTheirEffectThroughTheAPI(t *testing.T) {
	w := start(t, "disk-import-refused@refused,vmi-unschedulable@big,provider-id-missing@kairos,cluster-dns-mismatch,"+
		"node-tainted@taint,guest-join-rejected@rejected,node-not-ready@notready")
	ctx := t.Context()
	// A kubelet configuration whose clusterDNS names no CoreDNS Service (here: none at all).
	testkit.Must(t, w.tenant.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.KubeletConfigNamespace, Name: names.KubeletConfigName},
		Data: map[string]string{names.KubeletConfigKey: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDomain: cluster.local\n"}}))
	m := func(pool string) string { return release + "-" + pool + "-abcde-x7k2p" }
	w.guestMemory["big"] = "128Gi"
	for _, p := range []string{"refused", "big", "taint", "rejected", "notready"} {
		w.machine(t, p, m(p), false)
	}
	w.machine(t, "kairos", m("kairos"), true)

	var lastDV *cdiv1.DataVolume
	defer func() {
		if t.Failed() && lastDV != nil {
			imp := &corev1.Pod{}
			_ = w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.ImporterPod(lastDV.Name)}, imp)
			t.Logf("DataVolume status: %+v\nimporter: %s %+v", lastDV.Status, imp.Status.Phase, imp.Status.ContainerStatuses)
		}
	}()
	// disk-import-refused: Running=False Error quoting the 401, restarts climbing, phase not Succeeded.
	w.until(t, "refused import restarting", func(ctx context.Context) (bool, error) {
		dv := &cdiv1.DataVolume{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.DataVolume(m("refused"))}, dv); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		lastDV = dv
		for _, c := range dv.Status.Conditions {
			if c.Type == cdiv1.DataVolumeRunning && c.Status == corev1.ConditionFalse && c.Reason == "Error" && strings.Contains(c.Message, "401 Unauthorized") {
				return dv.Status.RestartCount >= 2 && dv.Status.Phase == cdiv1.ImportInProgress, nil
			}
		}
		return false, nil
	})
	imp := &corev1.Pod{}
	testkit.Must(t, w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.ImporterPod(names.DataVolume(m("refused")))}, imp))
	if cs := imp.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount < 2 || cs[0].LastTerminationState.Terminated == nil || cs[0].LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("importer container status %+v", imp.Status.ContainerStatuses)
	}
	// vmi-unschedulable: a VM larger than the Node; the real scheduler says Insufficient memory on
	// the launcher (or on its temporary pod, while the disk waits for its first consumer), and the
	// real virt-controller copies it onto the VMI.
	w.until(t, "launcher unschedulable", func(ctx context.Context) (bool, error) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m("big")}, vmi); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, c := range vmi.Status.Conditions {
			if string(c.Type) == "PodScheduled" && c.Reason == "Unschedulable" && strings.Contains(c.Message, "Insufficient memory") {
				// On a WaitForFirstConsumer class (the harness's, as on the lanes) the temporary
				// launcher is what cannot be placed, and the VMI stays Pending.
				return vmi.Status.Phase == kubevirtv1.Scheduling || vmi.Status.Phase == kubevirtv1.Pending, nil
			}
		}
		return false, nil
	})
	// provider-id-missing: the Kairos Node carries the host's metal- name and never a providerID.
	kairosNode := w.tenantNode(t, "Kairos node under another name", func(n corev1.Node) bool { return strings.HasPrefix(n.Name, "metal-") })
	// node-tainted and node-not-ready.
	w.until(t, "tainted and not-ready nodes", func(ctx context.Context) (bool, error) {
		var taint, notReady corev1.Node
		if err := w.tenant.Client.Get(ctx, client.ObjectKey{Name: m("taint")}, &taint); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if err := w.tenant.Client.Get(ctx, client.ObjectKey{Name: m("notready")}, &notReady); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		ready := func(n corev1.Node) corev1.ConditionStatus {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status
				}
			}
			return ""
		}
		return len(taint.Spec.Taints) > 0 && taint.Spec.Taints[0].Effect == corev1.TaintEffectNoSchedule && ready(taint) == corev1.ConditionTrue &&
			ready(notReady) == corev1.ConditionFalse, nil
	})
	// guest-join-rejected on a Talos guest: the kubelet never registers; the console carries
	// no kubelet output on Talos but machined's line for the kubelet that exited, which quotes
	// its last words: the tenant's refusal.
	// The VMI and its launcher come when the scheduler places them; under load that can be after
	// every other fault above has shown, so both are waited for, not read once.
	w.until(t, "the join refused", func(context.Context) (bool, error) {
		data, _ := os.ReadFile(w.env.ObservationsPath())
		return strings.Contains(string(data), `"fault":"guest-join-rejected"`), nil
	})
	var pod *corev1.Pod
	w.until(t, "the rejected guest's launcher Pod", func(ctx context.Context) (bool, error) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m("rejected")}, vmi); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		var err error
		pod, err = kubevirt.Launcher(ctx, w.c, vmi)
		return pod != nil, err
	})
	path, _ := w.env.Logs.ContainerLog(ns, pod.Name, kubevirt.ConsoleContainer)
	if data, _ := os.ReadFile(path); strings.Contains(string(data), "register") || !strings.Contains(string(data), "[talos]") {
		t.Errorf("a Talos console shows machined's lines and nothing of the kubelet's registration:\n%s", data)
	}
	w.until(t, "machined's line for the exited kubelet", func(context.Context) (bool, error) {
		data, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, `[talos] service[kubelet](Waiting): Error running Containerd(kubelet), going to restart forever: task "kubelet" failed: exit code 1 (last log`) &&
				strings.Contains(l, "Unauthorized") {
				return true, nil
			}
		}
		return false, nil
	})
	if err := w.tenant.Client.Get(ctx, client.ObjectKey{Name: m("rejected")}, &corev1.Node{}); err == nil {
		t.Error("a Node registered although the join was refused")
	}
	if kairosNode.Spec.ProviderID != "" {
		t.Errorf("the mismatched Node %s got providerID %q", kairosNode.Name, kairosNode.Spec.ProviderID)
	}

	seen := map[faults.Name]simenv.Observation{}
	f, err := os.Open(w.env.ObservationsPath())
	testkit.Must(t, err)
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var o simenv.Observation
		testkit.Must(t, json.Unmarshal(sc.Bytes(), &o))
		if _, ok := seen[o.Fault]; !ok {
			seen[o.Fault] = o
		}
	}
	for _, n := range []faults.Name{faults.DiskImportRefused, faults.VMIUnschedulable, faults.ProviderIDMissing, faults.ClusterDNSMismatch,
		faults.NodeTainted, faults.GuestJoinRejected, faults.NodeNotReady} {
		o, ok := seen[n]
		if !ok {
			t.Errorf("no observation of %s", n)
			continue
		}
		t.Logf("%-20s %-10s %s: %s", n, o.Pool, o.Object, o.Detail)
	}
	// The Talos guest's token is one the tenant does not hold: the tenant apiserver refused it.
	if o := seen[faults.GuestJoinRejected]; !strings.Contains(o.Detail, "Unauthorized") {
		t.Errorf("the refused join does not show the tenant refusing the bootstrap token: %s", o.Detail)
	}
}

// vmi-crash-once crashes the pool's first running domain once: virt-handler's stand-in fails the
// VMI, the real VM controller starts a new one (runStrategy Always), and that one's guest joins.
func TestACrashedVMIIsReplacedAndJoins(t *testing.T) {
	w := start(t, "vmi-crash-once@crash")
	name := release + "-crash-abcde-x7k2p"
	w.machine(t, "crash", name, false)
	var first string
	w.until(t, "the crash recorded", func(context.Context) (bool, error) {
		data, _ := os.ReadFile(w.env.ObservationsPath())
		for _, line := range strings.Split(string(data), "\n") {
			var o simenv.Observation
			if json.Unmarshal([]byte(line), &o) == nil && o.Fault == faults.VMICrashOnce {
				first = o.UID
				return true, nil
			}
		}
		return false, nil
	})
	vmi := &kubevirtv1.VirtualMachineInstance{}
	w.until(t, "a new VMI running", func(ctx context.Context) (bool, error) {
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return string(vmi.UID) != first && vmi.Status.Phase == kubevirtv1.Running, nil
	})
	w.until(t, "its Node", func(ctx context.Context) (bool, error) {
		err := w.tenant.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{})
		return err == nil, client.IgnoreNotFound(err)
	})
	data, _ := os.ReadFile(w.env.ObservationsPath())
	if n := strings.Count(string(data), `"fault":"vmi-crash-once"`); n != 1 {
		t.Errorf("%d crashes recorded, want 1", n)
	}
}
