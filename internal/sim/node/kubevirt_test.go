package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// virt-handler runs on the real Node as virt-operator installs it for the platform's KubeVirt CR
// (with the real-node lane's emulation and placement): its DaemonSet, service accounts, RBAC
// and certificates from virt-operator's own code (install-strategy), placed by the real
// DaemonSet controller and scheduler, pulled from the local registry and run by the real
// kubelet: its init container (the launcher image's node labeller) writes the node's
// capabilities, virt-handler reaches the apiserver through the kubernetes Service, goes Ready,
// and marks the Node schedulable for VMIs with its device plugins registered: the Node carries
// kubevirt.io/schedulable=true (kubevirt.io/kubevirt v1.8.4
// pkg/virt-handler/heartbeat/heartbeat.go:139-165) and allocatable devices.kubevirt.io/tun
// (pkg/virt-handler/device-manager/device_controller.go:106-118), and the node labeller's
// machine-type.node.kubevirt.io/ labels (pkg/virt-handler/node-labeller/node_labeller.go).
// Then virt-api (checkVirtAPI) and a VMI booted on the Node by the real virt-controller
// (checkVMIBoots), in the same world.
func TestRealNodeRunsKubeVirtAndBootsAVMIUnderTCG(t *testing.T) {
	tools := nodeHost(t)
	imgs := builtImages(t)
	cp := cptest.Tools(t)
	addr, err := node.HostAddress()
	if err != nil {
		t.Fatal(err)
	}
	api := cptest.APIServer(t, controlplane.APIServerOptions{AdvertiseAddress: addr})
	ctx, cancel := context.WithTimeout(context.Background(), simtest.HostSlotWait+10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	kcm, err := controlplane.StartControllerManager(ctx, cp, api, controlplane.ControllerManagerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kcm.Stop(5 * time.Second) })
	sched, err := controlplane.StartScheduler(ctx, cp, api, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sched.Stop(5 * time.Second) })
	c, err := cluster.New("management", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(api.Admin())

	b, err := realupstream.Find(cp)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := b.KubeVirtCR()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := b.KubeVirtInstallFor(ctx, realupstream.RealNodeKubeVirtCR(cr, node.Label, node.Taint))
	if err != nil {
		t.Fatal(err)
	}
	if err := realupstream.InstallCRDs(ctx, c, kv.CRDs, nil); err != nil {
		t.Fatal(err)
	}
	if c, err = cluster.New("management", api.Admin()); err != nil { // to see the new kinds
		t.Fatal(err)
	}

	reg := registry(ctx, t, tools, testkit.LogWriter(t))
	if _, err := imgs.Push(ctx, reg, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(ctx, t, tools, api, reg)
	// CDI before KubeVirt's workloads, as the world installs its CRDs: virt-api starts again when
	// CDI's DataSource kind appears after it (kubevirt.io/kubevirt v1.8.4
	// pkg/virt-api/api.go:1264-1276), without endpoints meanwhile, and virt-controller's writes
	// through its webhooks fail and back off.
	disk := startDiskImport(ctx, t, b, c, cs, api, n, reg, imgs)

	start := time.Now()
	if err := realupstream.ApplyVirtHandler(ctx, c, kv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dumpPodLogs(t, filepath.Join(n.Dir(), "kubelet", "pod-logs")) })
	handler := waitPodReady(ctx, t, cs, "virt-handler", n.Name)
	t.Logf("virt-handler from its DaemonSet to Ready: %s (pod %s, %s)", time.Since(start).Round(100*time.Millisecond), handler.Name, handler.Status.PodIP)
	testkit.Eventually(ctx, t, "the Node schedulable for VMIs", testkit.Left(ctx), testkit.Err(func() error {
		nd, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if nd.Labels["kubevirt.io/schedulable"] != "true" {
			return fmt.Errorf("labels %v", nd.Labels)
		}
		if q, ok := nd.Status.Allocatable["devices.kubevirt.io/tun"]; !ok || q.IsZero() {
			return fmt.Errorf("allocatable %v", nd.Status.Allocatable)
		}
		return nil
	}))
	t.Logf("the Node schedulable for VMIs %s after the DaemonSet", time.Since(start).Round(100*time.Millisecond))
	nd, _ := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	var machines []string
	for k := range nd.Labels {
		if strings.HasPrefix(k, "machine-type.node.kubevirt.io/") {
			machines = append(machines, strings.TrimPrefix(k, "machine-type.node.kubevirt.io/"))
		}
	}
	if len(machines) == 0 {
		t.Errorf("the node labeller gave the Node no machine-type label: %v", nd.Labels)
	}
	t.Logf("machine types the labeller found: %v", machines)

	checkVirtAPI(ctx, t, c, cs, kv, n.Name)
	checkVMIBoots(ctx, t, b, c, cs, api, kv, n, kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: disk.DataVolume}})
	disk.check()
	// The VMI and its DataVolume deleted, the claim goes, the released volume is deleted and
	// its folder removed from the host (the provisioner's teardown).
	if err := c.Client.Delete(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "boot", Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	disk.checkDeleted()
}

// checkVMIBoots runs the real virt-controller beside virt-handler and virt-api and creates a VMI
// that tolerates the real Node's taint and boots disk (the worker's disk CDI's real importer
// wrote into a volume of the real Node, startDiskImport), with the BIOS, as the chart's Talos machines do
// (they set no firmware), and the pod network bound by masquerade: the bridge binding moves the
// pod's address onto a dummy link (kubevirt.io/kubevirt v1.8.4
// pkg/network/setup/netpod/netpod.go:392-400), a link type these machines' kernel lacks
// (CONFIG_DUMMY is not set; virt-handler fails the VMI with "LinkAdd: operation not supported"),
// and masquerade needs none (:415-470). virt-controller renders its virt-launcher Pod
// (pkg/virt-controller/services/template.go), the scheduler places it on the real Node, the
// kubelet runs it with the disk's volume, virt-handler hands the launcher the domain, and virt-launcher starts QEMU under TCG. The VMI goes Running on the real Node, a
// qemu-system-x86_64 of the launcher runs on the host, and the guest kernel's own boot lines
// ("Linux version") and its init's are read from the serial console through virt-api's console
// subresource with the harness's own console dialer.
func checkVMIBoots(ctx context.Context, t *testing.T, b *realupstream.Build, c *cluster.Cluster, cs kubernetes.Interface, api *controlplane.APIServer, kv *realupstream.KubeVirt, n *node.Node, disk kubevirtv1.VolumeSource) {
	t.Helper()
	// virt-controller runs as its service account, as its Pod would: virt-api's mutator drops
	// VMI status updates from anyone but KubeVirt's service accounts (kubevirt.io/kubevirt v1.8.4
	// pkg/virt-api/webhooks/mutating-webhook/mutators/vmi-mutator.go:134-142,
	// pkg/virt-api/webhooks/serviceaccounts.go:28-37).
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubevirt-controller.kubeconfig")
	if err := api.ServiceAccountKubeconfig(realupstream.KubeVirtNamespace, "kubevirt-controller", kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctl, err := realupstream.StartVirtController(ctx, b, c, kv, realupstream.Options{Dir: filepath.Join(dir, "virt-controller"), Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	stopped(t, ctl)
	start := time.Now()
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "boot", Namespace: "default"},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
				Devices: kubevirtv1.Devices{
					LogSerialConsole: testkit.Ptr(true),
					Disks:            []kubevirtv1.Disk{{Name: "system", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}},
					Interfaces: []kubevirtv1.Interface{{Name: "default",
						InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}},
				},
			},
			Volumes:     []kubevirtv1.Volume{{Name: "system", VolumeSource: disk}},
			Networks:    []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()},
			Tolerations: []corev1.Toleration{{Key: node.Taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if err := c.Client.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	subresource := consoleFrom(ctx, api.Admin(), vmi.Namespace, vmi.Name, "Linux version ", guestUp)
	testkit.Eventually(ctx, t, "the VMI Running on the real Node", testkit.Left(ctx), testkit.Err(func() error {
		got := &kubevirtv1.VirtualMachineInstance{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil {
			return err
		}
		if got.Status.Phase == kubevirtv1.Failed {
			t.Fatalf("the VMI failed: %+v; %s", got.Status.Conditions, lastWarning(ctx, cs, "default"))
		}
		if got.Status.Phase != kubevirtv1.Running {
			launchers := launcherState(ctx, cs)
			if strings.Contains(launchers, string(corev1.PodFailed)) {
				t.Fatalf("the VMI's launcher failed: %s; VMI phase %q, conditions %+v", launchers, got.Status.Phase, got.Status.Conditions)
			}
			return fmt.Errorf("phase %q on %q, conditions %+v; %s; %s", got.Status.Phase, got.Status.NodeName, got.Status.Conditions, launchers, lastWarning(ctx, cs, "default"))
		}
		if got.Status.NodeName != n.Name {
			return fmt.Errorf("Running on %q", got.Status.NodeName)
		}
		return nil
	}))
	t.Logf("the VMI Running on the real Node %s after its creation", time.Since(start).Round(100*time.Millisecond))
	out, err := exec.Command("pgrep", "-a", "qemu-system").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "qemu-system-x86_64") || !strings.Contains(string(out), "default_boot") || !strings.Contains(string(out), "-accel tcg") {
		t.Errorf("no qemu-system-x86_64 of the VMI under TCG on the host: %v: %s", err, out)
	}
	var got consoleRead
	select {
	case got = <-subresource:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if got.err != nil {
		t.Fatalf("the guest's boot lines on the VMI's console through virt-api: %v; it read %q", got.err, got.text)
	}
	t.Logf("the guest's kernel and init on the console through virt-api %s after the VMI's creation: %s", got.after.Round(100*time.Millisecond), lineOf(got.text, "Linux version "))
	// the launcher's guest-console-log container (logSerialConsole) keeps the whole serial log
	// from the guest's first byte, read through the kubelet's log endpoint
	logCtx, cancelLog := context.WithTimeout(ctx, time.Minute)
	defer cancelLog()
	testkit.Eventually(logCtx, t, "the guest's boot lines in the guest-console-log container's log through the apiserver", testkit.Left(ctx), testkit.Err(func() error {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: kubevirtv1.CreatedByLabel + "=" + string(vmi.UID)})
		if err != nil || len(pods.Items) != 1 {
			return fmt.Errorf("the VMI's launcher Pods: %v (%d)", err, len(pods.Items))
		}
		data, err := cs.CoreV1().Pods("default").GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: serialconsole.LogContainer}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), "Linux version ") || !strings.Contains(string(data), guestUp) {
			return fmt.Errorf("its log holds %d bytes without both lines: %q", len(data), testkit.Tail(string(data), 5))
		}
		return nil
	}))
}

// guestUp is the worker disk's init's line (hack/tools/images/guest-init).
const guestUp = node.GuestInit

type consoleRead struct {
	text  string
	after time.Duration
	err   error
}

// consoleFrom reads the VMI's serial console through virt-api's console subresource with the
// harness's dialer from as early as it is served: virt-api refuses it until the VMI runs, and
// each refusal is dialled again after 250 ms. It sends what it read once the console showed every
// line of want, or when ctx ends.
func consoleFrom(ctx context.Context, cfg *rest.Config, ns, vmi string, want ...string) <-chan consoleRead {
	out := make(chan consoleRead, 1)
	start := time.Now()
	dial := serialconsole.SubresourceDialer(cfg)
	go func() {
		var seen bytes.Buffer
		var last error
		for {
			conn, err := dial(ctx, ns, vmi)
			if err == nil {
				stop := context.AfterFunc(ctx, func() { conn.Close() })
				buf := make([]byte, 4096)
				for {
					k, rerr := conn.Read(buf)
					seen.Write(buf[:k])
					if containsAll(seen.String(), want) {
						stop()
						conn.Close()
						out <- consoleRead{text: seen.String(), after: time.Since(start)}
						return
					}
					if rerr != nil {
						err = rerr
						break
					}
				}
				stop()
				conn.Close()
			}
			last = err
			select {
			case <-ctx.Done():
				out <- consoleRead{text: seen.String(), after: time.Since(start), err: fmt.Errorf("%w; the console's last error: %v", ctx.Err(), last)}
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return out
}

func containsAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// lineOf is the line of s that begins with prefix, from the prefix on.
func lineOf(s, prefix string) string {
	i := strings.Index(s, prefix)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.IndexAny(s, "\r\n"); j >= 0 {
		s = s[:j]
	}
	return s
}

// launcherState is the virt-launcher Pods of namespace default, with their phase, Node and
// containers' states.
func launcherState(ctx context.Context, cs kubernetes.Interface) string {
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-launcher"})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("launcher %s: %s on %q, containers %+v", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.ContainerStatuses))
	}
	if len(out) == 0 {
		return "no launcher Pod"
	}
	return strings.Join(out, "; ")
}

// checkVirtAPI installs virt-api as virt-operator does once virt-handler has marked the Node, and
// checks it as a client meets it: its Pod Ready on the real Node (one replica for one
// schedulable Node), its subresource API Available through the aggregator and answering there
// (GET .../version, kubevirt.io/kubevirt v1.8.4 pkg/virt-api/api.go:431), its
// mutator defaulting a new VMI (the kubevirt.io/foregroundDeleteVirtualMachine finalizer and
// phase Pending, pkg/virt-api/webhooks/mutating-webhook/mutators/vmi-mutator.go:116-120) and its
// validator refusing a VMI whose disk names no volume (pkg/virt-api/webhooks/validating-webhook/
// admitters/vmi-create-admitter.go:620-632, the message pattern of :86).
func checkVirtAPI(ctx context.Context, t *testing.T, c *cluster.Cluster, cs kubernetes.Interface, kv *realupstream.KubeVirt, node string) {
	t.Helper()
	start := time.Now()
	if err := realupstream.ApplyVirtAPI(ctx, c, kv); err != nil {
		t.Fatal(err)
	}
	d, err := cs.AppsV1().Deployments(realupstream.KubeVirtNamespace).Get(ctx, "virt-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("virt-api Deployment replicas %v, want 1 for one schedulable Node", d.Spec.Replicas)
	}
	waitPodReady(ctx, t, cs, "virt-api", node)
	t.Logf("virt-api from its Deployment to Ready: %s", time.Since(start).Round(100*time.Millisecond))
	var version []byte
	testkit.Eventually(ctx, t, "virt-api's subresource API through the aggregator", testkit.Left(ctx), testkit.Err(func() error {
		var err error
		version, err = cs.Discovery().RESTClient().Get().AbsPath("/apis/subresources.kubevirt.io/v1/version").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, version)
		}
		return nil
	}))
	var info struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(version, &info); err != nil || info.GitVersion != "v1.8.4" {
		t.Errorf("virt-api's version through the aggregator: %s (%v), want gitVersion v1.8.4", version, err)
	}
	t.Logf("virt-api answers through the aggregator %s after its Deployment (gitVersion %s)", time.Since(start).Round(100*time.Millisecond), info.GitVersion)

	mem := resource.MustParse("64Mi")
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: "default"},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: mem}}},
		},
	}
	if err := c.Client.Create(ctx, vmi); err != nil {
		t.Fatalf("a VMI through virt-api's webhooks: %v", err)
	}
	if !slices.Contains(vmi.Finalizers, kubevirtv1.VirtualMachineInstanceFinalizer) || vmi.Status.Phase != kubevirtv1.Pending {
		t.Errorf("virt-api's mutator did not default the VMI: finalizers %v, phase %q", vmi.Finalizers, vmi.Status.Phase)
	}
	// it was for admission only: no launcher of it is to wait beside the VMI checkVMIBoots starts
	if err := c.Client.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	bad := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan-disk", Namespace: "default"},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: mem}},
				Devices:   kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "orphan"}}},
			},
		},
	}
	err = c.Client.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "virtualmachineinstances-create-validator.kubevirt.io") || !strings.Contains(err.Error(), "'orphan' not found") {
		t.Errorf("a VMI whose disk names no volume: %v, want virt-api's validator to refuse it", err)
	}
}

// waitPodReady waits for the one Pod of KubeVirt's component (label kubevirt.io=<component>, in
// KubeVirtNamespace) to be Ready on the Node named node, and returns it.
func waitPodReady(ctx context.Context, t *testing.T, cs kubernetes.Interface, component, node string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testkit.Eventually(ctx, t, "the "+component+" Pod Ready on the real Node", testkit.Left(ctx), testkit.Err(func() error {
		pods, err := cs.CoreV1().Pods(realupstream.KubeVirtNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=" + component})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d %s Pods; %s", len(pods.Items), component, lastWarning(ctx, cs, realupstream.KubeVirtNamespace))
		}
		pod = &pods.Items[0]
		if pod.Spec.NodeName != node {
			return fmt.Errorf("%s Pod %s on %q, conditions %+v", component, pod.Name, pod.Spec.NodeName, pod.Status.Conditions)
		}
		for _, cd := range pod.Status.Conditions {
			if cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("%s Pod %s: phase %s, init %+v, containers %+v", component, pod.Name, pod.Status.Phase, pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses)
	}))
	return pod
}

// lastWarning is the newest Warning event of namespace ns, as "Reason: message (object)".
func lastWarning(ctx context.Context, cs kubernetes.Interface, ns string) string {
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil || len(evs.Items) == 0 {
		return "no Warning event"
	}
	last := evs.Items[0]
	for _, e := range evs.Items {
		if e.LastTimestamp.After(last.LastTimestamp.Time) {
			last = e
		}
	}
	return fmt.Sprintf("last Warning: %s: %s (%s %s)", last.Reason, last.Message, last.InvolvedObject.Kind, last.InvolvedObject.Name)
}

// dumpPodLogs prints the end of every container log the kubelet wrote when the test failed.
func dumpPodLogs(t *testing.T, dir string) {
	if !t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*.log"))
	for _, p := range logs {
		data, _ := os.ReadFile(p)
		t.Logf("end of %s:\n%s", p, testkit.Tail(string(data), 30))
	}
}
