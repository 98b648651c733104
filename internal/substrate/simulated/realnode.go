package simulated

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/node"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
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
// virt-operator installs it for the lane's KubeVirt CR (realupstream.RealNodeKubeVirtCR), and the
// platform's CDI CR as the lane changes it (realupstream.RealNodeCDI). kwok keeps playing every other
// Node. What it starts stops with w.
func (s *Substrate) startRealNode(ctx context.Context, w *world.World, kv *realupstream.KubeVirt) error {
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
	if err := s.pushWorkload(ctx, reg); err != nil {
		return err
	}
	if s.env.Faults != nil && s.env.Faults.Selected(faults.RegistryUnavailableOnce) {
		reg.RefuseManifests(node.WorkerDiskJoin, 1)
	}
	n, err = node.Start(ctx, node.Options{Name: RealNodeName, Dir: dir, Tools: tools, APIServer: w.API, Registry: reg, Log: s.o.Log})
	if err != nil {
		return fmt.Errorf("sim: the real Node: %w", err)
	}
	if s.talos != nil {
		s.talos.setUnreachable(n.Unassigned)
	}
	cs, err := kubernetes.NewForConfig(w.API.Admin())
	if err != nil {
		return err
	}
	if err := n.WaitReady(ctx, cs); err != nil {
		return fmt.Errorf("sim: the real Node: %w", err)
	}
	ready := time.Since(start)
	if err := realupstream.RealNodeCDI(ctx, w.Cluster, reg.Host, node.Taint); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	handler, api, err := startKubeVirtOnNode(ctx, w, cs, kv)
	if err != nil {
		return err
	}
	s.env.RealNodeRegistry = reg.Host
	fmt.Fprintf(s.o.Log, "sim: real Node %s (%s) Ready in %s, virt-handler Ready on it %s later, virt-api serving %s after that\n", RealNodeName, n.Subnet,
		ready.Round(time.Millisecond), handler.Round(time.Millisecond), api.Round(time.Millisecond))
	return nil
}

// pushWorkload serves the workload image the guests run (node.WorkloadImage) and gives the
// Talos pools the local registry as their mirror (talosTemplates). The lane pins that image as
// its workload: a pin it does not match is refused here.
func (s *Substrate) pushWorkload(ctx context.Context, reg *node.Registry) error {
	img, err := node.WorkloadImage()
	if err != nil {
		return err
	}
	d, err := reg.Push(ctx, node.WorkloadRef, img)
	if err != nil {
		return err
	}
	if s.talos == nil {
		return nil
	}
	if w := s.lane.Workload; w.Image != node.WorkloadRepo || w.Digest != d.String() {
		return fmt.Errorf("sim: lane %s: its guests pull their workload from this run's local registry, which serves %s@%s; "+
			"the lane's workload is %s@%s: set workload.image and workload.digest in lanes/%s.yaml to the former",
			s.lane.Name, node.WorkloadRepo, d, w.Image, w.Digest, s.lane.Name)
	}
	return s.talos.setMirrors(reg.Host, reg.MirroredHosts())
}

// startKubeVirtOnNode installs virt-handler and then virt-api as virt-operator does, and waits
// for each on the real Node, then for virt-api's APIServices: how long each took.
func startKubeVirtOnNode(ctx context.Context, w *world.World, cs kubernetes.Interface, kv *realupstream.KubeVirt) (handler, api time.Duration, err error) {
	start := time.Now()
	if err := realupstream.ApplyVirtHandler(ctx, w.Cluster, kv); err != nil {
		return 0, 0, fmt.Errorf("sim: %w", err)
	}
	if err := waitComponentReady(ctx, cs, "virt-handler", RealNodeName); err != nil {
		return 0, 0, err
	}
	handler = time.Since(start)
	// virt-api after virt-handler has marked the Node: virt-operator sizes virt-api by the
	// schedulable Nodes (realupstream.ApplyVirtAPI).
	if err := realupstream.ApplyVirtAPI(ctx, w.Cluster, kv); err != nil {
		return 0, 0, fmt.Errorf("sim: %w", err)
	}
	if err := waitComponentReady(ctx, cs, "virt-api", RealNodeName); err != nil {
		return 0, 0, err
	}
	dyn, err := dynamic.NewForConfig(w.API.Admin())
	if err != nil {
		return 0, 0, err
	}
	var names []string
	for _, a := range kv.APIServices {
		names = append(names, a.GetName())
	}
	// The aggregator reports an APIService Available once it reaches the Service's endpoints.
	if err := install.APIServicesAvailable(ctx, dyn, names, install.GateOptions{Log: io.Discard}); err != nil {
		return 0, 0, fmt.Errorf("sim: virt-api on the real Node: %w", err)
	}
	return handler, time.Since(start) - handler, nil
}

// waitComponentReady waits until KubeVirt's component (its Pods labelled kubevirt.io=<name>) has
// a Ready Pod on the Node nodeName, saying where it stands on the way.
func waitComponentReady(ctx context.Context, cs kubernetes.Interface, component, nodeName string) error {
	last := "no Pod yet"
	for {
		pods, err := cs.CoreV1().Pods(realupstream.KubeVirtNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=" + component})
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

// realNodePostRenderers are the Flux post-renderers (github.com/fluxcd/helm-controller/api v1.6.2
// v2/helmrelease_types.go:183-186, 215-244, PostRenderers: a kustomize post-renderer's patches) through which
// a lane with a real Node changes the workers the real chart renders (cozystack v1.6.1
// packages/apps/kubernetes/templates/cluster.yaml:64-190), in each KubevirtMachineTemplate
// (spec.template.spec.virtualMachineTemplate: CAPK v0.1.10
// api/v1alpha1/kubevirtmachinetemplate_types.go:25,56, api/v1alpha1/kubevirtmachine_types.go:44).
// Each change is one this machine needs, and the release shows it:
//   - the system disk's DataVolume imports the worker's disk built here from the local registry
//     (a registry source, as the Kairos pools import theirs), not the Talos image from the image
//     factory (cluster.yaml:102-104), which no one here can reach;
//   - the pod network is bound by masquerade, not bridge (cluster.yaml:172-174): the bridge
//     binding needs a dummy link, which this kernel lacks (kubevirt.io/kubevirt v1.8.4
//     pkg/network/setup/netpod/netpod.go:392-400; internal/sim/node's test says so);
//   - the VM has a virtio-rng device (kubevirt.io/api v1.8.4 core/v1/schema.go:575, Devices.Rng):
//     under TCG the guest kernel's own entropy takes a minute or more, which the guest's kubelet
//     waits for before its first key (internal/sim/guestos's boot test measured crng init at 99 s
//     without it, 30 s with it); under KVM the CPU's RDRAND gives it at once;
//   - the VM runs on the real Node: its label selected, its taint tolerated.
func realNodePostRenderers(registry string) []any {
	vm := "/spec/template/spec/virtualMachineTemplate/spec"
	ops := []any{
		map[string]any{"op": "replace", "path": vm + "/dataVolumeTemplates/0/spec/source",
			"value": map[string]any{"registry": map[string]any{"url": node.WorkerDiskURL(registry, true)}}},
		map[string]any{"op": "replace", "path": vm + "/template/spec/domain/devices/interfaces/0",
			"value": map[string]any{"name": "default", "masquerade": map[string]any{}}},
		map[string]any{"op": "add", "path": vm + "/template/spec/domain/devices/rng", "value": map[string]any{}},
		map[string]any{"op": "add", "path": vm + "/template/spec/nodeSelector", "value": map[string]any{node.Label: "true"}},
		map[string]any{"op": "add", "path": vm + "/template/spec/tolerations",
			"value": []any{map[string]any{"key": node.Taint, "operator": "Exists", "effect": "NoSchedule"}}},
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		panic(err) // maps of strings
	}
	return []any{map[string]any{"kustomize": map[string]any{"patches": []any{map[string]any{
		"target": map[string]any{"group": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtMachineTemplate"},
		"patch":  string(patch),
	}}}}}
}
