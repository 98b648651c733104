package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
)

// Options configure one real Node.
type Options struct {
	// Name is the Node's name.
	Name string
	// Dir is the node's run folder (it must exist): containerd's root, state and socket, the
	// kubelet's root, the CNI configuration and addresses, the logs.
	Dir   string
	Tools Tools
	// APIServer is the management apiserver the kubelet registers with; its CA issues the
	// kubelet's client certificate (system:node:<Name> in system:nodes, which its Node
	// authorizer serves).
	APIServer *controlplane.APIServer
	// Registry is the local registry; its mirror entries are written for containerd at Start.
	Registry *Registry
	// Log receives the node's own lines (a restart, a stop).
	Log io.Writer
}

// Node is a running real Node: containerd and the kubelet, each supervised.
type Node struct {
	Name   string
	l      layout
	bridge string
	Subnet string
	// Unassigned is the address of Subnet no Pod is given (its last: host-local stops one
	// short of it): on the Node's bridge, where nothing answers for it.
	Unassigned string
	rangeEnd   string
	containerd *supervised
	kubelet    *supervised
	kubeProxy  *supervised
	log        io.Writer
	tools      Tools
	// lock is the host's node lock, held from Start to Stop (host.go).
	lock *os.File
	// claimed: KubeletRoot is this node's (takeHost wrote its marker), so Stop removes it.
	claimed bool
	// init is PID 1 of the node's PID namespace (host.go), initDone closed when it ended.
	init     *exec.Cmd
	initDone chan struct{}
	// hostBefore are the host folders outside the run folder that were there before Start
	// (hostPaths); Stop removes the others once empty.
	hostBefore map[string]bool
}

// bridgePrefix begins the name of every node's bridge.
const bridgePrefix = "cze"

// PodRange holds every real Node's pod subnet (Node.Subnet).
const PodRange = podRangePrefix + ".0.0/16"

const podRangePrefix = "10.89"

// Start writes the node's configuration and starts containerd, then the kubelet; it returns
// once both run (the Node registers on its own: WaitReady waits for it).
func Start(ctx context.Context, o Options) (*Node, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	l := layout{dir: o.Dir}
	h := sha256.Sum256([]byte(o.Dir))
	n := &Node{Name: o.Name, l: l, log: o.Log, tools: o.Tools,
		// a bridge and a /24 of its own per run folder, so two nodes on one host do not meet;
		// 10.89.0.0/16 is outside the sim's Pod (10.244.0.0/16) and Service (10.96.0.0/16) ranges
		bridge: bridgePrefix + hex.EncodeToString(h[:4]), Subnet: fmt.Sprintf("%s.%d.0/24", podRangePrefix, h[4]),
		Unassigned: fmt.Sprintf("%s.%d.254", podRangePrefix, h[4]), rangeEnd: fmt.Sprintf("%s.%d.253", podRangePrefix, h[4]),
		hostBefore: existing(hostPaths())}
	for _, d := range []string{"containerd", "kubelet/pki", "kubelet/pod-logs", "cni/net.d", "cni/ipam", "logs"} {
		if err := os.MkdirAll(l.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := n.writeConfig(o); err != nil {
		return nil, err
	}
	if err := n.takeHost(ctx); err != nil {
		n.Stop()
		return nil, err
	}
	if err := n.startInit(o.Tools); err != nil {
		n.Stop()
		return nil, err
	}
	n.containerd = &supervised{name: "containerd", path: "containerd", args: []string{"--config", l.path("containerd", "config.toml")},
		logPath: l.path("logs", "containerd.log"), log: o.Log, pidns: n.pidns(), mntns: n.mntns()}
	if err := n.containerd.start(); err != nil {
		return nil, err
	}
	if err := waitSocket(ctx, l.socket(), n.containerd); err != nil {
		n.Stop()
		return nil, err
	}
	args, err := n.kubeletArgs(o)
	if err != nil {
		n.Stop()
		return nil, err
	}
	n.kubelet = &supervised{name: "kubelet", path: o.Tools.Path("kubelet"), args: args, logPath: l.path("logs", "kubelet.log"), log: o.Log, pidns: n.pidns(), mntns: n.mntns()}
	if err := n.kubelet.start(); err != nil {
		n.Stop()
		return nil, err
	}
	if err := n.startKubeProxy(o); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) writeConfig(o Options) error {
	if err := o.Registry.WriteMirrors(n.l.certsD()); err != nil {
		return err
	}
	files := map[string]string{
		n.l.path("containerd", "config.toml"):        containerdConfig(n.l, PauseRef),
		n.l.path("cni", "net.d", "10-node.conflist"): cniConfig(n.bridge, n.Subnet, n.rangeEnd, n.l.path("cni", "ipam")),
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// kubeletArgs writes the kubelet's credentials and configuration and returns its flags.
func (n *Node) kubeletArgs(o Options) ([]string, error) {
	kp, err := o.APIServer.CA.Client("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return nil, err
	}
	kubeconfig := n.l.path("kubelet", "kubeconfig")
	cfg := &rest.Config{Host: o.APIServer.URL, TLSClientConfig: rest.TLSClientConfig{CAData: o.APIServer.CA.CertPEM, CertData: kp.CertPEM, KeyData: kp.KeyPEM}}
	if err := cluster.WriteKubeconfig(kubeconfig, "node-"+n.Name, cfg); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	config := n.l.path("kubelet", "config.yaml")
	// The Node's address is the host's: a loopback one is refused ("nodeIP can't be loopback
	// address", k8s.io/kubernetes v1.35.4 pkg/kubelet/kubelet_node_status.go:712), and kube-proxy
	// waits for the Node's address before it writes a rule.
	addr, err := HostAddress()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := os.WriteFile(config, []byte(kubeletConfig(n.l, o.APIServer.CACertPath, addr, ports[0], ports[1])), 0o644); err != nil {
		return nil, err
	}
	return []string{
		"--config=" + config, "--kubeconfig=" + kubeconfig, "--root-dir=" + KubeletRoot,
		"--cert-dir=" + n.l.path("kubelet", "pki"), "--hostname-override=" + n.Name, "--node-ip=" + addr,
		"--node-labels=" + Label + "=true", "--v=2",
	}, nil
}

func freePorts(k int) ([]int, error) {
	var out []int
	for range k {
		p, err := controlplane.FreePort()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// waitSocket waits until containerd answers on its socket.
func waitSocket(ctx context.Context, sock string, s *supervised) error {
	start := time.Now()
	for {
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if s.pid() == 0 && s.restartCount() > 0 {
			return fmt.Errorf("containerd exited before it answered on %s; see %s", sock, s.logPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd did not answer on %s after %s (%v): %v; see %s", sock, time.Since(start).Round(time.Millisecond), ctx.Err(), err, s.logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitReady waits until the Node is registered and Ready, saying what it last saw when ctx ends.
func (n *Node) WaitReady(ctx context.Context, c kubernetes.Interface) error {
	start := time.Now()
	last := "not registered yet"
	for {
		node, err := c.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err.Error()
		default:
			last = "no Ready condition yet"
			for _, cd := range node.Status.Conditions {
				if cd.Type == corev1.NodeReady {
					if cd.Status == corev1.ConditionTrue {
						return nil
					}
					last = fmt.Sprintf("Ready=%s %s: %s", cd.Status, cd.Reason, cd.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: not Ready after %s: %s; the kubelet's log is %s, containerd's %s",
				n.Name, time.Since(start).Round(time.Second), last, n.kubelet.logPath, n.containerd.logPath)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Pids are containerd's and the kubelet's process ids (0 when one is down).
func (n *Node) Pids() (containerd, kubelet int) { return n.containerd.pid(), n.kubelet.pid() }

// Restarts are how often containerd and the kubelet were started again after they died.
func (n *Node) Restarts() (containerd, kubelet int) {
	return n.containerd.restartCount(), n.kubelet.restartCount()
}

// Logs are containerd's, the kubelet's and kube-proxy's log files.
func (n *Node) Logs() []string {
	return []string{n.l.path("logs", "containerd.log"), n.l.path("logs", "kubelet.log"), n.l.path("logs", "kube-proxy.log")}
}

// Dir is the node's run folder.
func (n *Node) Dir() string { return filepath.Clean(n.l.dir) }
