package world

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// NodeSpec is one management Node: a stand-in for a kind node, with the allocatable resources
// the real scheduler places virt-launcher and importer pods against.
type NodeSpec struct {
	Name string
	// CPU and Memory are allocatable quantities ("8", "16Gi").
	CPU, Memory string
	Pods        int
}

// KwokNodeAnnotation marks the Nodes the management kwok plays.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// DefaultNodes are three nodes of 8 cpu and 320Gi. A worker's disk binds on first consumer to
// the node its temporary launcher was placed on, and its launcher must follow it there whatever
// landed on that node meanwhile, so any one node may end up with every worker of a phase: each
// holds 75 workers of 4Gi with their launchers' overhead (internal/sim/capacity), so a lane of
// one 64-worker pool beside the sim lane's others, or of 16 one-worker pools, fits wherever the
// scheduler puts the disks. The lane check holds every sim lane to these Nodes
// (internal/sim/capacity), so a lane that does not fit is refused before it runs. A
// virt-launcher asking for more memory than one node has stays Pending with "Insufficient
// memory", as on a real cluster.
func DefaultNodes() []NodeSpec {
	return []NodeSpec{
		{Name: "sim-worker-1", CPU: "8", Memory: "320Gi", Pods: 110},
		{Name: "sim-worker-2", CPU: "8", Memory: "320Gi", Pods: 110},
		{Name: "sim-worker-3", CPU: "8", Memory: "320Gi", Pods: 110},
	}
}

// nodeEphemeralStorage is each management Node's allocatable ephemeral storage.
const nodeEphemeralStorage = "100Gi"

func createNodes(ctx context.Context, c *cluster.Cluster, specs []NodeSpec) error {
	for _, s := range specs {
		cpu, err := resource.ParseQuantity(s.CPU)
		if err != nil {
			return fmt.Errorf("management node %s: cpu %q: %w", s.Name, s.CPU, err)
		}
		mem, err := resource.ParseQuantity(s.Memory)
		if err != nil {
			return fmt.Errorf("management node %s: memory %q: %w", s.Name, s.Memory, err)
		}
		// A kubelet reports its root filesystem as ephemeral-storage; a virt-launcher asks for
		// some (kubevirt/kubevirt v1.8.4 pkg/virt-controller/services/renderresources.go
		// WithEphemeralStorageRequest, 50M). A kind node's disk is the runner's.
		res := corev1.ResourceList{
			corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem,
			corev1.ResourcePods:             *resource.NewQuantity(int64(s.Pods), resource.DecimalSI),
			corev1.ResourceEphemeralStorage: resource.MustParse(nodeEphemeralStorage),
		}
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        s.Name,
				Annotations: map[string]string{KwokNodeAnnotation: "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname": s.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
					"type": "kwok",
				},
			},
			Status: corev1.NodeStatus{Allocatable: res, Capacity: res},
		}
		if err := c.Client.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("management node %s: %w", s.Name, err)
		}
	}
	// kwok marks them Ready; the scheduler places nothing on a node that is not.
	var last string
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		for _, s := range specs {
			var n corev1.Node
			if err := c.Client.Get(ctx, clientKey("", s.Name), &n); err != nil {
				last = err.Error()
				return false, nil
			}
			if !nodeReady(&n) {
				last = "node " + s.Name + " is not Ready yet"
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("management nodes never went Ready under kwok (%w); last: %s; see kwok/kwok.log in the sim folder (E2E_KEEP=1 keeps it)", err, last)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
