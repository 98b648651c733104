package node_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// checkMarks: the Node carries the label and the taint, and not the annotation kwok manages
// Nodes by.
func checkMarks(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[node.Label] != "true" {
		t.Errorf("node %s labels %v, want %s=true", name, n.Labels, node.Label)
	}
	tainted := false
	for _, tn := range n.Spec.Taints {
		tainted = tainted || (tn.Key == node.Taint && tn.Effect == corev1.TaintEffectNoSchedule)
	}
	if !tainted {
		t.Errorf("node %s taints %v, want %s:NoSchedule", name, n.Spec.Taints, node.Taint)
	}
	if _, ok := n.Annotations[world.KwokNodeAnnotation]; ok {
		t.Errorf("node %s carries %s: kwok would play it", name, world.KwokNodeAnnotation)
	}
	if v := n.Status.NodeInfo.KubeletVersion; v != "v1.35.4" {
		t.Errorf("node %s kubelet version %q, want v1.35.4", name, v)
	}
	if rt := n.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rt, "containerd://") {
		t.Errorf("node %s runtime %q, want containerd://...", name, rt)
	}
}

// runPod creates a Pod bound to the node and waits until its container runs.
func runPod(ctx context.Context, t *testing.T, c kubernetes.Interface, nodeName, image, token string) *corev1.Pod {
	t.Helper()
	// No kube-controller-manager here makes the namespace's default ServiceAccount.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "payload", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: new(int64),
			Tolerations:                   []corev1.Toleration{{Key: node.Taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name: "payload", Image: image, Args: []string{token}, ImagePullPolicy: corev1.PullIfNotPresent,
			}},
		},
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	testkit.Eventually(ctx, t, "the Pod Running with its container running", testkit.Left(ctx), testkit.Err(func() error {
		p, err := c.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got = p
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("phase %s, conditions %v, containers %+v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
		}
		return nil
	}))
	return got
}

// hostProcess is the pid of the process on this host whose command line holds token.
func hostProcess(t *testing.T, token string) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(d + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(token)) && bytes.HasPrefix(cmdline, []byte("/bin/payload\x00")) {
			var pid int
			fmt.Sscanf(filepath.Base(d), "%d", &pid)
			return pid
		}
	}
	t.Fatalf("no process on this host runs /bin/payload %s", token)
	return 0
}

// checkContainer: the kubelet reports a containerd container and a pod IP from the node's
// bridge; the process on the host lives in a network namespace of its own.
func checkContainer(t *testing.T, p *corev1.Pod, pid int, subnet string) {
	t.Helper()
	cs := p.Status.ContainerStatuses[0]
	if !strings.HasPrefix(cs.ContainerID, "containerd://") || !strings.HasPrefix(cs.ImageID, "docker.io/library/payload@sha256:") {
		t.Errorf("container status: id %q image id %q, want containerd://... and the image's digest", cs.ContainerID, cs.ImageID)
	}
	_, cidr, _ := net.ParseCIDR(subnet)
	if ip := net.ParseIP(p.Status.PodIP); ip == nil || !cidr.Contains(ip) {
		t.Errorf("pod IP %q is not in the node's subnet %s", p.Status.PodIP, subnet)
	}
	mine, _ := os.Readlink("/proc/self/ns/net")
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil || theirs == mine {
		t.Errorf("the payload's network namespace %q (%v) is the host's %q", theirs, err, mine)
	}
	t.Logf("pod %s: %s on %s, pid %d in %s", p.Name, cs.ContainerID, p.Status.PodIP, pid, theirs)
}

// leftover says what a stopped node left: processes naming its folder, mounts under it, log
// links into it, host folders it made (not in before), its bridge.
func leftover(dir string, before map[string]bool) string {
	var left []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(d + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			left = append(left, "process "+filepath.Base(d)+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			left = append(left, "mount "+f[4])
		}
	}
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, _ := os.Readlink(l); strings.HasPrefix(target, dir+"/") {
			left = append(left, "log link "+l)
		}
	}
	for _, p := range nodeMade {
		if _, err := os.Stat(p); err == nil && !before[p] {
			left = append(left, p+" (not there before the node)")
		}
	}
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, "cze") {
			left = append(left, "network interface "+i.Name)
		}
	}
	return strings.Join(left, "; ")
}

// nodeMade are host folders a node makes: containerd's cgroup, the kubelet's log links and
// device plugin folder (fixed paths whatever the kubelet's root).
var nodeMade = []string{"/sys/fs/cgroup/memory/k8s.io", "/var/log/containers", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet"}

// hostState says which host folders the node may make are there now.
func hostState() map[string]bool {
	out := map[string]bool{}
	for _, p := range nodeMade {
		if _, err := os.Stat(p); err == nil {
			out[p] = true
		}
	}
	return out
}

// dumpLogs prints the end of containerd's and the kubelet's logs when the test failed.
func dumpLogs(t *testing.T, n *node.Node) {
	if !t.Failed() {
		return
	}
	for _, p := range n.Logs() {
		data, _ := os.ReadFile(p)
		t.Logf("end of %s:\n%s", p, testkit.Tail(string(data), 40))
	}
}

// registry starts the local registry on this host's address (where the real Node's pods reach
// it) with the pause image every Pod's sandbox needs, stopped when t ends.
func registry(ctx context.Context, t *testing.T, tools node.Tools, log io.Writer) *node.Registry {
	t.Helper()
	addr, err := node.HostAddress()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := node.StartRegistryOn(addr, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	pause, err := node.PauseImage(tools)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Push(ctx, node.PauseRef, pause); err != nil {
		t.Fatal(err)
	}
	return reg
}

// startNode starts a real Node in a run folder of its own and waits until it is Ready; when t
// ends the node's logs are printed if t failed, then it is stopped and its folder removed.
func startNode(ctx context.Context, t *testing.T, tools node.Tools, api *controlplane.APIServer, reg *node.Registry) *node.Node {
	t.Helper()
	dir, err := os.MkdirTemp("", "node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	n, err := node.Start(ctx, node.Options{Name: "real-node-0", Dir: dir, Tools: tools, APIServer: api, Registry: reg, Log: testkit.LogWriter(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	t.Cleanup(func() { dumpLogs(t, n) })
	if err := n.WaitReady(ctx, kubernetes.NewForConfigOrDie(api.Admin())); err != nil {
		t.Fatal(err)
	}
	return n
}

// stopped stops the upstream controller ctl when t ends, after printing the end of its log if t
// failed.
func stopped(t *testing.T, ctl *realupstream.Controller) {
	t.Cleanup(func() { ctl.Stop(5 * time.Second) })
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(ctl.LogPath)
			t.Logf("end of %s's log:\n%s", ctl.Name, testkit.Tail(string(data), 30))
		}
	})
}
