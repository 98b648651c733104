package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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
func TestRealNodeRunsVirtHandlerAsVirtOperatorInstallsIt(t *testing.T) {
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
