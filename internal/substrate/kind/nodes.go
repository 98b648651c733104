package kind

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/cozystack/cozy-e2e/internal/install"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

var gvrNode = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// LabelControlPlane waits until the cluster has registered want Node objects (Ready or not:
// the nodes have no CNI until the platform brings one, so kind is not asked to wait for Ready)
// and gives every control-plane node the label the platform's generic variant selects:
// node-role.kubernetes.io/control-plane=true. kubeadm sets that label with an empty value,
// and the kubelet refuses node-role labels in --node-labels, so the kind config cannot carry
// it: it is set here, after create and before the platform is applied. The same patch removes
// kubeadm's assumptions.ExcludeFromExternalLBLabel from them, as Cozystack's own e2e does: MetalLB's
// speaker announces no address from a node that carries it, so on a cluster whose only nodes
// with a speaker are control planes the tenant apiservers' LoadBalancer addresses would be
// assigned and never answer. kind v0.33.0 removes the label itself only from a one-node cluster
// (pkg/cluster/internal/create/actions/kubeadminit/init.go:159-168); this holds for any count.
func LabelControlPlane(ctx context.Context, dyn dynamic.Interface, want int, log io.Writer) ([]string, error) {
	var cps []string
	what := fmt.Sprintf("%d Node objects registered (Ready comes with the platform's CNI)", want)
	err := install.Wait(ctx, dyn, install.Watch{GVR: gvrNode}, what, log, func(objs []*unstructured.Unstructured) (bool, string, error) {
		cps = cps[:0]
		var names []string
		for _, n := range objs {
			names = append(names, n.GetName())
			if _, ok := n.GetLabels()[assumptions.ControlPlaneLabel]; ok {
				cps = append(cps, n.GetName())
			}
		}
		if len(objs) < want {
			return false, fmt.Sprintf("%d of %d registered (%s)", len(objs), want, strings.Join(names, ", ")), nil
		}
		if len(cps) == 0 {
			return false, fmt.Sprintf("no Node carries %s yet (kubeadm's mark-control-plane sets it)", assumptions.ControlPlaneLabel), nil
		}
		return true, "", nil
	})
	if err != nil {
		return nil, err
	}
	// A merge patch's null deletes the key (RFC 7386).
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{
		assumptions.ControlPlaneLabel: assumptions.ControlPlaneLabelValue, assumptions.ExcludeFromExternalLBLabel: nil}}})
	for _, name := range cps {
		if _, err := dyn.Resource(gvrNode).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: install.FieldOwner}); err != nil {
			return nil, fmt.Errorf("label Node %s %s=%s and remove %s: %w", name, assumptions.ControlPlaneLabel, assumptions.ControlPlaneLabelValue, assumptions.ExcludeFromExternalLBLabel, err)
		}
	}
	return append([]string(nil), cps...), nil
}
