package guest

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/internal/sim/bootdata"
	"github.com/cozystack/cozy-e2e/internal/sim/faults"
	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/standin"
)

// KwokNodeAnnotation marks a Node for the tenant's kwok, which plays its kubelet.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// stuckTaint is the taint a node-tainted guest registers with: an operator taint, not one of
// the transient taints a starting node sheds.
var stuckTaint = corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}

const notReadyMessage = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"

// hostnameLabel is the well-known label the kubelet sets to its hostname when it registers
// (k8s.io/api v0.35.4 core/v1/well_known_labels.go:20, LabelHostname).
const hostnameLabel = "kubernetes.io/hostname"

// leaseRenew is how often a not-ready guest's kubelet renews its Lease.
const leaseRenew = 10 * time.Second

// newNode is the Node a kubelet registers for vmi.
func newNode(name string, d bootdata.Data, vmi *kubevirtv1.VirtualMachineInstance, notReady, tainted bool) *corev1.Node {
	// The guest's memory is what the domain gives it: memory.guest, or the memory request
	// (kubevirt.io/api core/v1 Memory.Guest: "defaults to the requested memory").
	mem := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]
	if g := vmi.Spec.Domain.Memory; g != nil && g.Guest != nil {
		mem = g.Guest.DeepCopy()
	}
	cpus := int64(1)
	if c := vmi.Spec.Domain.CPU; c != nil {
		cpus = int64(max(c.Cores, 1) * max(c.Sockets, 1) * max(c.Threads, 1))
	}
	res := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI), corev1.ResourceMemory: mem,
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")}
	osImage, kernel := "Talos (v1.13.6)", "6.18.2-talos"
	if d.OS == names.OSKairos {
		osImage, kernel = "Ubuntu 24.04.2 LTS (Kairos)", "6.8.0-60-generic"
	}
	ip := ""
	if len(vmi.Status.Interfaces) > 0 {
		ip = vmi.Status.Interfaces[0].IP
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{hostnameLabel: name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: d.KubernetesVersion, OSImage: osImage, KernelVersion: kernel,
				ContainerRuntimeVersion: "containerd://2.1.4", OperatingSystem: "linux", Architecture: "amd64",
				MachineID: string(vmi.UID), SystemUUID: string(vmi.UID)},
		},
	}
	if notReady {
		// The kubelet runs but reports its network not ready; kwok does not play it.
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message: notReadyMessage, LastHeartbeatTime: now, LastTransitionTime: now}}
	} else {
		n.Annotations[KwokNodeAnnotation] = "fake"
	}
	if tainted {
		n.Spec.Taints = []corev1.Taint{stuckTaint}
	}
	return n
}

// heartbeat renews a not-ready node's Lease, so the node stays Ready=False rather than Unknown,
// until ctx ends.
func (gu *guest) heartbeat(ctx context.Context, wc client.Client, name string) {
	for {
		lease := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: "kube-node-lease", Name: name}
		now := metav1.NewMicroTime(gu.env().Now())
		dur := int32(40)
		err := wc.Get(ctx, key, lease)
		switch {
		case apierrors.IsNotFound(err):
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: &dur, RenewTime: &now}}
			_ = wc.Create(ctx, lease)
		case err == nil:
			lease.Spec.RenewTime = &now
			_ = wc.Update(ctx, lease)
		}
		if !sleep(ctx, leaseRenew) {
			return
		}
	}
}

// ProviderIDLateDelay is how long after its Node registered a worker under providerid-late
// patches the Node's providerID.
const ProviderIDLateDelay = 10 * time.Second

// patchProviderID is the post-bootstrap step of a Kairos worker's data: once its Node is
// registered it patches the Node's providerID (the provider's CAPK template, polling for the
// Node every 5 s, then kubectl patch node $(hostname)); at once, or ProviderIDLateDelay after
// the registration under providerid-late, whose two moments are recorded.
func (gu *guest) patchProviderID(ctx context.Context, wc client.Client, pool standin.Pool, node, providerID string, late bool) {
	obj := "Node/" + node
	if late {
		_ = gu.env().Observe(simenv.Observation{Fault: faults.ProviderIDLate, Pool: pool.Name, Object: obj,
			Detail: fmt.Sprintf("Node %s registered for VMI %s without a providerID", node, gu.vmi.Name)})
		if !sleep(ctx, ProviderIDLateDelay) {
			return
		}
	}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"providerID":%q}}`, providerID)))
	for try := 1; try <= 30; try++ {
		err := wc.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, patch)
		if err == nil {
			if late {
				_ = gu.env().Observe(simenv.Observation{Fault: faults.ProviderIDLate, Pool: pool.Name, Object: obj,
					Detail: fmt.Sprintf("providerID %s patched onto Node %s", providerID, node)})
			}
			return
		}
		gu.g.logf("VMI %s/%s: patching the providerID of Node %s (try %d of 30): %v", gu.vmi.Namespace, gu.vmi.Name, node, try, err)
		if !sleep(ctx, 5*time.Second) {
			return
		}
	}
}
