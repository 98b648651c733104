package realupstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/sim/capacity"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// vmSpec is a worker VM as CAPK writes it from Cozystack's KubevirtMachineTemplate (see
// kubevirtMachineSpec), without its DataVolume: a container disk needs no CDI.
const vmSpec = `
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: worker
  namespace: tenant-kv
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu:
          cores: 2
        devices:
          disks:
          - name: system
            disk:
              bus: virtio
          interfaces:
          - name: default
            bridge: {}
        memory:
          guest: 4Gi
      evictionStrategy: External
      networks:
      - name: default
        pod: {}
      volumes:
      - name: system
        containerDisk:
          image: quay.io/containerdisks/fedora:latest`

// The real virt-controller v1.8.4, configured by the platform's KubeVirt CR, against the sim's
// management cluster: it leads, creates the VMI of a VirtualMachine with runStrategy Always and
// its virt-launcher Pod from its own template (managedFields say so), copies the scheduler's
// PodScheduled=False onto the VMI while no Node is schedulable for KubeVirt, hands the VMI over
// as Scheduled once the launcher runs, and replaces a VMI that failed, counting a start
// failure and showing CrashLoopBackOff when it never ran.
func TestVirtController(t *testing.T) {
	b := findBuild(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w := startWorld(ctx, t, b)
	start := time.Now()
	kv, err := b.KubeVirtInstall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("install strategy: %d CRDs in %s", len(kv.CRDs), time.Since(start).Round(time.Millisecond))
	cdi, err := b.VirtControllerCDICRDs()
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := realupstream.InstallCRDs(ctx, w.Cluster, append(kv.CRDs, cdi...), nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("KubeVirt's and CDI's CRDs established in %s", time.Since(start).Round(time.Millisecond))
	ctl, err := realupstream.StartVirtController(ctx, b, w.Cluster, kv, realupstream.Options{Dir: controllerDir(t, "virt-controller"), Kubeconfig: w.API.AdminKubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Stop(5 * time.Second) })
	logController(t, ctl)
	c := freshClient(t, w)
	create(ctx, t, c, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tenant-kv\n---"+vmSpec)

	vmi := &kubevirtv1.VirtualMachineInstance{}
	var launcher *corev1.Pod
	testkit.Eventually(ctx, t, "the VMI and its launcher Pod, unschedulable", time.Minute, func() (bool, string) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-kv", Name: "worker"}, vmi); err != nil {
			return false, err.Error()
		}
		launcher = launcherOf(ctx, t, c, vmi)
		if launcher == nil {
			return false, "VMI " + string(vmi.Status.Phase) + ", no launcher"
		}
		cond := vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled))
		return cond != nil && cond.Status == corev1.ConditionFalse, fmt.Sprintf("VMI %s, conditions %v", vmi.Status.Phase, vmi.Status.Conditions)
	}, endOf(ctl.LogPath))
	t.Logf("launcher %s: nodeSelector %v, requests %v, limits %v, containers %v",
		launcher.Name, launcher.Spec.NodeSelector, launcher.Spec.Containers[0].Resources.Requests,
		launcher.Spec.Containers[0].Resources.Limits, containerNames(launcher))
	t.Logf("VMI %s: PodScheduled=False: %s", vmi.Status.Phase, vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled)).Message)
	for _, o := range []client.Object{vmi, launcher} {
		if !managedBy(o, "virt-controller") {
			t.Errorf("%T %s: managedFields %v do not name virt-controller", o, o.GetName(), managers(o))
		}
	}
	if launcher.Labels[kubevirtv1.CreatedByLabel] != string(vmi.UID) || launcher.Labels[kubevirtv1.AppLabel] != "virt-launcher" {
		t.Errorf("launcher labels %v", launcher.Labels)
	}
	mem := launcher.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
	if guest := resource.MustParse("4Gi"); mem.Cmp(guest) <= 0 {
		t.Errorf("launcher requests %s of memory, not the guest's 4Gi and KubeVirt's overhead", mem.String())
	}
	// The lane check's price of a worker (capacity.WorkerPrice) is this launcher's compute
	// container: KubeVirt's arithmetic written out must be what virt-controller asks. Less one
	// term: the page tables are a 512th of the VMI's memory request, which virt-api's defaults
	// set from the guest memory on a real cluster; no virt-api runs here, so the sim's launcher
	// asks that much less than the price (the check stays on the safe side by it).
	guest := resource.MustParse("4Gi")
	price := capacity.WorkerPrice(2, guest, false)
	wantMem := *resource.NewQuantity(price.Memory.Value()-resource.NewScaledQuantity(guest.ScaledValue(resource.Kilo), resource.Kilo).Value()/512, resource.BinarySI)
	compute := launcher.Spec.Containers[0]
	for _, ctr := range launcher.Spec.Containers {
		if ctr.Name == "compute" {
			compute = ctr
		}
	}
	if got := compute.Resources.Requests; got.Memory().Cmp(wantMem) != 0 || got.Cpu().Cmp(price.CPU) != 0 {
		t.Errorf("launcher %s's compute container asks for %s memory and %s cpu; capacity.WorkerPrice says %s (%s without page tables): the lane check's price no longer matches virt-controller",
			launcher.Name, got.Memory(), got.Cpu(), price, wantMem.String())
	}
	if launcher.Spec.NodeSelector[kubevirtv1.NodeSchedulable] != "true" {
		t.Errorf("launcher nodeSelector %v lacks %s=true", launcher.Spec.NodeSelector, kubevirtv1.NodeSchedulable)
	}
	for _, n := range containerNames(launcher) {
		if n == "guest-console-log" {
			t.Errorf("launcher runs guest-console-log though the platform's KubeVirt CR sets disableSerialConsoleLog")
		}
	}

	// What virt-handler does for its Node: the schedulable label and the device plugins' resources.
	schedulable(ctx, t, c, launcher)
	testkit.Eventually(ctx, t, "the VMI Scheduled (the launcher runs)", time.Minute, func() (bool, string) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
			return false, err.Error()
		}
		return vmi.Status.Phase == kubevirtv1.Scheduled, string(vmi.Status.Phase)
	}, endOf(ctl.LogPath))

	// The domain crashes before it ran (what virt-handler reports): the VM controller counts a
	// start failure, shows CrashLoopBackOff while it backs off, and starts a new VMI after it.
	first := vmi.UID
	t.Logf("VMI %s on %s, launcher containers %v", vmi.Status.Phase, vmi.Status.NodeName, containerNames(launcherOf(ctx, t, c, vmi)))
	failVMI(ctx, t, c, vmi)
	vm := &kubevirtv1.VirtualMachine{}
	testkit.Eventually(ctx, t, "the VM in CrashLoopBackOff with one start failure", time.Minute, func() (bool, string) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(vmi), vm); err != nil {
			return false, err.Error()
		}
		sf := vm.Status.StartFailure
		return vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusCrashLoopBackOff && sf != nil && sf.ConsecutiveFailCount == 1,
			fmt.Sprintf("%s %+v", vm.Status.PrintableStatus, sf)
	}, endOf(ctl.LogPath))
	t.Logf("VM status: %s, startFailure %+v (retry in %s)", vm.Status.PrintableStatus, *vm.Status.StartFailure,
		time.Until(vm.Status.StartFailure.RetryAfterTimestamp.Time).Round(time.Second))
	testkit.Eventually(ctx, t, "a new VMI after the backoff", 40*time.Second, func() (bool, string) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
			return false, err.Error()
		}
		return vmi.UID != first, string(vmi.UID)
	}, endOf(ctl.LogPath))
}

func launcherOf(ctx context.Context, t *testing.T, c *cluster.Cluster, vmi *kubevirtv1.VirtualMachineInstance) *corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].Annotations[kubevirtv1.EphemeralProvisioningObject] == "" {
			return &pods.Items[i]
		}
	}
	return nil
}

func vmiCondition(vmi *kubevirtv1.VirtualMachineInstance, typ kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == typ {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

func containerNames(p *corev1.Pod) []string {
	var out []string
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		out = append(out, c.Name)
	}
	return out
}

func managers(o client.Object) []string {
	var out []string
	for _, m := range o.GetManagedFields() {
		out = append(out, m.Manager)
	}
	return out
}

func managedBy(o client.Object, manager string) bool {
	for _, m := range managers(o) {
		if m == manager {
			return true
		}
	}
	return false
}

// schedulable makes every Node what virt-handler makes its own: labelled kubevirt.io/schedulable
// and offering every extended resource the launcher asks for (its device plugins').
func schedulable(ctx context.Context, t *testing.T, c *cluster.Cluster, launcher *corev1.Pod) {
	t.Helper()
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		patch := map[string]any{"metadata": map[string]any{"labels": map[string]string{kubevirtv1.NodeSchedulable: "true"}}}
		data, _ := json.Marshal(patch)
		if err := c.Client.Patch(ctx, &n, client.RawPatch(types.MergePatchType, data)); err != nil {
			t.Fatal(err)
		}
		devices := corev1.ResourceList{}
		for name := range launcher.Spec.Containers[0].Resources.Requests {
			if strings.HasPrefix(string(name), "devices.kubevirt.io/") {
				devices[name] = resource.MustParse("1k")
			}
		}
		st := map[string]any{"status": map[string]any{"capacity": devices, "allocatable": devices}}
		data, _ = json.Marshal(st)
		if err := c.Client.Status().Patch(ctx, &n, client.RawPatch(types.MergePatchType, data)); err != nil {
			t.Fatal(err)
		}
	}
}

// failVMI marks vmi Failed as virt-handler does when the domain crashed (kubevirt.io/kubevirt
// v1.8.4 pkg/virt-handler/vm.go lines 2198-2201).
func failVMI(ctx context.Context, t *testing.T, c *cluster.Cluster, vmi *kubevirtv1.VirtualMachineInstance) {
	t.Helper()
	vmi.Status.Phase = kubevirtv1.Failed
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
		kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: kubevirtv1.Failed, PhaseTransitionTimestamp: metav1.Now()})
	if err := c.Client.Update(ctx, vmi); err != nil {
		t.Fatalf("VMI %s/%s status: %v", vmi.Namespace, vmi.Name, err)
	}
}
