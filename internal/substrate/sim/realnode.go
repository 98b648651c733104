package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/upstream"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/substrate"
)

// RealNodeName is the real Node's name in a world of a lane with sim.realNode.
const RealNodeName = "real-node-0"

// realNodeDir is the real Node's run folder under the sim's working folder (kept short: the
// node's sockets live under it), and the folder of its volumes in it.
func realNodeDir(simDir string) string     { return filepath.Join(simDir, "node") }
func realNodeVolumes(simDir string) string { return filepath.Join(realNodeDir(simDir), "local-path") }

// prepareRealNode readies, before the world starts, what a lane with a real Node changes in it:
// the address the management apiserver advertises (this host's: the Node's pods reach the
// apiserver through the kubernetes Service, whose endpoint it is), KubeVirt installed for the
// Node and cdi-controller reaching its pods (real), and the provisioner's folder for its volumes.
// Without a real Node it changes nothing and returns "".
func (s *Substrate) prepareRealNode(realNode bool, real *realControllers) (string, error) {
	if !realNode {
		return "", nil
	}
	addr, err := node.HostAddress()
	if err != nil {
		return "", err
	}
	real.realNode = true
	s.env.RealNodeVolumes = map[string]string{RealNodeName: realNodeVolumes(s.dir)}
	return addr, nil
}

// startRealNode brings the real Node into the world w (whose apiserver listens on this host's
// address): the local registry on that address serving the images built here, the Node itself
// (containerd, runc, the kubelet and kube-proxy on this host) Ready, virt-handler on it as
// virt-operator installs it for the lane's KubeVirt CR (upstream.RealNodeKubeVirtCR), and the
// platform's CDI CR as the lane changes it (upstream.RealNodeCDI). kwok keeps playing every other
// Node. What it starts stops with w.
func (s *Substrate) startRealNode(ctx context.Context, w *world.World, kv *upstream.KubeVirt) error {
	start := time.Now()
	tools, err := node.FindTools()
	if err != nil {
		return &substrate.PreflightError{Substrate: "sim", Missing: err.Error(), Hint: "run `make node-tools`"}
	}
	imgs, err := node.FindImages()
	if err != nil {
		return &substrate.PreflightError{Substrate: "sim", Missing: err.Error(), Hint: "run `make node-images`"}
	}
	addr, err := node.HostAddress()
	if err != nil {
		return err
	}
	dir := realNodeDir(s.dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	regLog, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return err
	}
	reg, err := node.StartRegistryOn(addr, regLog)
	if err != nil {
		regLog.Close()
		return err
	}
	var n *node.Node
	// The Node before the registry it pulls from; both after the manager (world.Stop).
	w.OnStop(func() {
		if n != nil {
			n.Stop()
		}
		reg.Stop()
		regLog.Close()
	})
	pause, err := node.PauseImage(tools)
	if err != nil {
		return err
	}
	if _, err := reg.Push(ctx, node.PauseRef, pause); err != nil {
		return err
	}
	if _, err := imgs.Push(ctx, reg, nil); err != nil {
		return err
	}
	n, err = node.Start(ctx, node.Options{Name: RealNodeName, Dir: dir, Tools: tools, APIServer: w.API, Registry: reg, Log: s.o.Log})
	if err != nil {
		return fmt.Errorf("sim: the real Node: %w", err)
	}
	cs, err := kubernetes.NewForConfig(w.API.Admin())
	if err != nil {
		return err
	}
	if err := n.WaitReady(ctx, cs); err != nil {
		return fmt.Errorf("sim: the real Node: %w", err)
	}
	ready := time.Since(start)
	if err := upstream.RealNodeCDI(ctx, w.Cluster, reg.Host, node.Taint); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if err := upstream.ApplyVirtHandler(ctx, w.Cluster, kv); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if err := waitComponentReady(ctx, cs, "virt-handler", RealNodeName); err != nil {
		return err
	}
	fmt.Fprintf(s.o.Log, "sim: real Node %s (%s) Ready in %s, virt-handler Ready on it %s later\n", RealNodeName, n.Subnet,
		ready.Round(time.Millisecond), (time.Since(start) - ready).Round(time.Millisecond))
	return nil
}

// waitComponentReady waits until KubeVirt's component (its Pods labelled kubevirt.io=<name>) has
// a Ready Pod on the Node nodeName, saying where it stands on the way.
func waitComponentReady(ctx context.Context, cs kubernetes.Interface, component, nodeName string) error {
	last := "no Pod yet"
	for {
		pods, err := cs.CoreV1().Pods(upstream.KubeVirtNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=" + component})
		if err == nil {
			for _, p := range pods.Items {
				if p.Spec.NodeName != nodeName {
					continue
				}
				last = fmt.Sprintf("Pod %s %s, containers %v", p.Name, p.Status.Phase, containerStates(p.Status.ContainerStatuses))
				for _, c := range p.Status.Conditions {
					if c.Type == "Ready" && c.Status == "True" {
						return nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sim: %s Ready on the real Node %s: %w (last: %s)", component, nodeName, ctx.Err(), last)
		case <-time.After(time.Second):
		}
	}
}

// containerStates is each container's name and state, as kubectl describes it.
func containerStates(cs []corev1.ContainerStatus) []string {
	var out []string
	for _, c := range cs {
		st := "waiting"
		switch {
		case c.State.Running != nil:
			st = "running"
		case c.State.Terminated != nil:
			st = "terminated: " + c.State.Terminated.Reason
		case c.State.Waiting != nil:
			st = "waiting: " + c.State.Waiting.Reason
		}
		out = append(out, c.Name+" "+st)
	}
	return out
}
