package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/upstream"
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
func TestRealNodeRunsVirtHandlerAndVirtAPIAsVirtOperatorInstallsThem(t *testing.T) {
	tools := nodeHost(t)
	imgs := builtImages(t)
	cp := cptest.Tools(t)
	addr, err := node.HostAddress()
	if err != nil {
		t.Fatal(err)
	}
	api := cptest.APIServer(t, controlplane.APIServerOptions{AdvertiseAddress: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
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

	b, err := upstream.Find(cp)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := b.KubeVirtCR()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := b.KubeVirtInstallFor(ctx, upstream.RealNodeKubeVirtCR(cr, node.Label, node.Taint))
	if err != nil {
		t.Fatal(err)
	}
	if err := upstream.InstallCRDs(ctx, c, kv.CRDs, nil); err != nil {
		t.Fatal(err)
	}
	if c, err = cluster.New("management", api.Admin()); err != nil { // to see the new kinds
		t.Fatal(err)
	}

	reg := registry(ctx, t, tools, &logWriter{t})
	if _, err := imgs.Push(ctx, reg, nil); err != nil {
		t.Fatal(err)
	}
	n := startNode(ctx, t, tools, api, reg)

	start := time.Now()
	if err := upstream.ApplyVirtHandler(ctx, c, kv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dumpPodLogs(t, filepath.Join(n.Dir(), "kubelet", "pod-logs")) })
	var handler *corev1.Pod
	waitFor(ctx, t, "the virt-handler Pod Ready on the real Node", func() error {
		pods, err := cs.CoreV1().Pods(upstream.KubeVirtNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-handler"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d virt-handler Pods; %s", len(pods.Items), lastWarning(ctx, cs, upstream.KubeVirtNamespace))
		}
		p := &pods.Items[0]
		handler = p
		if p.Spec.NodeName != n.Name {
			return fmt.Errorf("virt-handler Pod %s on %q, conditions %+v", p.Name, p.Spec.NodeName, p.Status.Conditions)
		}
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("virt-handler Pod %s: phase %s, init %+v, containers %+v", p.Name, p.Status.Phase, p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
	})
	t.Logf("virt-handler from its DaemonSet to Ready: %s (pod %s, %s)", time.Since(start).Round(100*time.Millisecond), handler.Name, handler.Status.PodIP)
	waitFor(ctx, t, "the Node schedulable for VMIs", func() error {
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
	})
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
}

// checkVirtAPI installs virt-api as virt-operator does once virt-handler has marked the Node, and
// checks it as a client meets it: its Pod Ready on the real Node (one replica for one
// schedulable Node), its subresource API Available through the aggregator and answering there
// (GET .../version, kubevirt.io/kubevirt v1.8.4 pkg/virt-api/api.go:431), its
// mutator defaulting a new VMI (the kubevirt.io/foregroundDeleteVirtualMachine finalizer and
// phase Pending, pkg/virt-api/webhooks/mutating-webhook/mutators/vmi-mutator.go:116-120) and its
// validator refusing a VMI whose disk names no volume (pkg/virt-api/webhooks/validating-webhook/
// admitters/vmi-create-admitter.go:620-632, the message pattern of :86).
func checkVirtAPI(ctx context.Context, t *testing.T, c *cluster.Cluster, cs kubernetes.Interface, kv *upstream.KubeVirt, node string) {
	t.Helper()
	start := time.Now()
	if err := upstream.ApplyVirtAPI(ctx, c, kv); err != nil {
		t.Fatal(err)
	}
	d, err := cs.AppsV1().Deployments(upstream.KubeVirtNamespace).Get(ctx, "virt-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("virt-api Deployment replicas %v, want 1 for one schedulable Node", d.Spec.Replicas)
	}
	waitFor(ctx, t, "the virt-api Pod Ready on the real Node", func() error {
		pods, err := cs.CoreV1().Pods(upstream.KubeVirtNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-api"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d virt-api Pods; %s", len(pods.Items), lastWarning(ctx, cs, upstream.KubeVirtNamespace))
		}
		p := &pods.Items[0]
		if p.Spec.NodeName != node {
			return fmt.Errorf("virt-api Pod %s on %q, conditions %+v", p.Name, p.Spec.NodeName, p.Status.Conditions)
		}
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("virt-api Pod %s: phase %s, containers %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	})
	t.Logf("virt-api from its Deployment to Ready: %s", time.Since(start).Round(100*time.Millisecond))
	var version []byte
	waitFor(ctx, t, "virt-api's subresource API through the aggregator", func() error {
		var err error
		version, err = cs.Discovery().RESTClient().Get().AbsPath("/apis/subresources.kubevirt.io/v1/version").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, version)
		}
		return nil
	})
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
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		t.Logf("end of %s:\n%s", p, strings.Join(lines, "\n"))
	}
}
