package kubevirt

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// What virt-handler keeps on its Node (kubevirt/kubevirt v1.8.4):
//   - the heartbeat: labels kubevirt.io/schedulable (true once its device plugins run) and
//     cpumanager (and its deprecated twin; false: no CPU manager on these Nodes), annotation
//     kubevirt.io/heartbeat with the time, by a strategic merge patch, first at start, then
//     every heartBeatInterval (one minute, pkg/virt-handler/vm.go line 191) with a jitter of
//     1.2 (pkg/virt-handler/heartbeat/heartbeat.go lines 84-99, 151-190). virt-controller's
//     node controller marks a Node unschedulable and fails its VMIs once the heartbeat is
//     five minutes old (pkg/virt-controller/watch/node/node.go lines 57, 194-210, 450-465);
//   - its device plugins' extended resources, which the launcher asks for (devices.kubevirt.io/
//     kvm, tun, vhost-net: pkg/virt-controller/services/template.go lines 81-83,
//     renderresources.go): 1000 of each (--max-devices, cmd/virt-handler/virt-handler.go line
//     106), which the kubelet reports in the Node's capacity and allocatable.
const (
	heartBeatInterval = time.Minute
	heartBeatJitter   = 1.2
	devicesPerPlugin  = 1000
)

// devicePlugins are the device plugins virt-handler always runs: the hypervisor's (kvm), tun and
// vhost-net (pkg/virt-handler/device-manager/device_controller.go lines 106-118), whose resources
// are named devices.kubevirt.io/<name> (generic_device.go lines 44, 84).
var devicePlugins = []corev1.ResourceName{"devices.kubevirt.io/kvm", "devices.kubevirt.io/tun", "devices.kubevirt.io/vhost-net"}

func setupNodes(mgr manager.Manager, env *simenv.Env) error {
	c := mgr.GetClient()
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			if err := heartbeat(ctx, c, env); err != nil && ctx.Err() == nil {
				mgr.GetLogger().Error(err, "virt-handler stand-in: heartbeat")
			}
			wait := time.Duration(float64(heartBeatInterval) * (1 + rand.Float64()*heartBeatJitter))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}))
}

// heartbeat is one heartbeat of every management Node's virt-handler (each Node runs one: a
// DaemonSet), with its device plugins registered. A real Node's virt-handler beats for itself.
func heartbeat(ctx context.Context, c client.Client, env *simenv.Env) error {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return err
	}
	now, err := json.Marshal(metav1.Now())
	if err != nil {
		return err
	}
	devices := corev1.ResourceList{}
	for _, d := range devicePlugins {
		devices[d] = *resource.NewQuantity(devicesPerPlugin, resource.DecimalSI)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if env.RealNode(n.Name) {
			continue
		}
		meta := fmt.Sprintf(`{"metadata":{"labels":{%q:"true",%q:"false",%q:"false"},"annotations":{%q:%s}}}`,
			kubevirtv1.NodeSchedulable, kubevirtv1.DeprecatedCPUManager, kubevirtv1.CPUManager, kubevirtv1.VirtHandlerHeartbeat, now)
		if err := c.Patch(ctx, n, client.RawPatch(types.StrategicMergePatchType, []byte(meta))); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if hasAll(n.Status.Allocatable, devices) {
			continue
		}
		st, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": devices, "allocatable": devices}})
		if err != nil {
			return err
		}
		if err := c.Status().Patch(ctx, n, client.RawPatch(types.StrategicMergePatchType, st)); err != nil {
			return fmt.Errorf("node %s status: %w", n.Name, err)
		}
	}
	return nil
}

func hasAll(have, want corev1.ResourceList) bool {
	for n, q := range want {
		if h, ok := have[n]; !ok || h.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
