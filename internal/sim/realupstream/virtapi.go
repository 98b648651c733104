package realupstream

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// VirtAPIService is the Service virt-api's webhooks and APIServices name (kubevirt.io/kubevirt
// v1.8.4 pkg/virt-operator/resource/generate/components/webhooks.go:934 VirtApiServiceName).
const VirtAPIService = "virt-api"

// ApplyVirtAPI installs virt-api as virt-operator does, on top of ApplyVirtHandler's objects: the
// virt-api Deployment with the replicas the operator gives it, then the admission webhook
// configurations virt-api serves and the subresource APIServices, each with the kubevirt-ca
// bundle (install-strategy sets it). The operator's own webhook configuration
// (virt-operator-validator, served by virt-operator's Service) is left out: no virt-operator
// runs here, and with its failurePolicy Fail it would refuse every change to the KubeVirt CR.
// An object already there is left as it is.
func ApplyVirtAPI(ctx context.Context, c *cluster.Cluster, kv *KubeVirt) error {
	if kv.API == nil {
		return fmt.Errorf("upstream: virt-api: install-strategy printed no virt-api Deployment")
	}
	d := kv.API.DeepCopy()
	n, err := virtAPIReplicas(ctx, c, kv.CR)
	if err != nil {
		return err
	}
	d.Spec.Replicas = &n
	if err := c.Client.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("upstream: the virt-api Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	var objs []*unstructured.Unstructured
	for _, w := range kv.Webhooks {
		if servedBy(w, VirtAPIService) {
			objs = append(objs, w)
		}
	}
	objs = append(objs, kv.APIServices...)
	for _, o := range objs {
		o := o.DeepCopy()
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("upstream: virt-operator's %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// virtAPIReplicas is the number of virt-api replicas virt-operator sets (kubevirt.io/kubevirt
// v1.8.4 pkg/virt-operator/resource/apply/apps.go:65-81 syncDeployment, :519-545
// getDesiredApiReplicas): the CR's infra.replicas when set; otherwise one for a single Node
// labelled kubevirt.io/schedulable=true, else a tenth of those Nodes and at least two. The
// operator counts again on every pass; this counts once, so ApplyVirtAPI comes after virt-handler
// has marked its Nodes.
func virtAPIReplicas(ctx context.Context, c *cluster.Cluster, cr *kubevirtv1.KubeVirt) (int32, error) {
	if cr.Spec.Infra != nil && cr.Spec.Infra.Replicas != nil {
		return int32(*cr.Spec.Infra.Replicas), nil
	}
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes, client.MatchingLabels{kubevirtv1.NodeSchedulable: "true"}); err != nil {
		return 0, fmt.Errorf("upstream: counting the Nodes for virt-api's replicas: %w", err)
	}
	if len(nodes.Items) == 1 {
		return 1, nil
	}
	return max(int32(len(nodes.Items))/10, 2), nil
}

// servedBy reports whether every webhook of configuration w calls the Service named service.
func servedBy(w *unstructured.Unstructured, service string) bool {
	hooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
	for _, h := range hooks {
		m, _ := h.(map[string]any)
		name, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name")
		if name != service {
			return false
		}
	}
	return len(hooks) > 0
}
