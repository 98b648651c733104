package realupstream

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/cozy-e2e/framework/cluster"
)

// RealNodeKubeVirtCR is the platform's KubeVirt CR as a lane with a real Node changes it, through
// the CR's own fields only:
//   - developerConfiguration.useEmulation: true, since KVM cannot run guests on these machines
//     (KubeVirt's own lanes without nested virtualization do the same; virt-controller then
//     requests no /dev/kvm for the launcher and passes --allow-emulation, kubevirt.io/kubevirt
//     v1.8.4 pkg/virt-controller/services/renderresources.go:433-452,
//     pkg/virt-controller/services/template.go:424-426);
//   - workloads.nodePlacement and infra.nodePlacement: virt-handler, and virt-api, only on the
//     Nodes labelled label=true, tolerating their taint (the real Node's), so no kwok Node gets
//     one (virt-operator injects them into the DaemonSet and the Deployments:
//     pkg/virt-operator/resource/apply/apps.go:63,382).
func RealNodeKubeVirtCR(cr *kubevirtv1.KubeVirt, label, taint string) *kubevirtv1.KubeVirt {
	out := cr.DeepCopy()
	if out.Spec.Configuration.DeveloperConfiguration == nil {
		out.Spec.Configuration.DeveloperConfiguration = &kubevirtv1.DeveloperConfiguration{}
	}
	out.Spec.Configuration.DeveloperConfiguration.UseEmulation = true
	for _, cc := range []**kubevirtv1.ComponentConfig{&out.Spec.Workloads, &out.Spec.Infra} {
		if *cc == nil {
			*cc = &kubevirtv1.ComponentConfig{}
		}
		if (*cc).NodePlacement == nil {
			(*cc).NodePlacement = &kubevirtv1.NodePlacement{}
		}
		np := (*cc).NodePlacement
		if np.NodeSelector == nil {
			np.NodeSelector = map[string]string{}
		}
		np.NodeSelector[label] = "true"
		np.Tolerations = append(np.Tolerations, corev1.Toleration{Key: taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// ApplyVirtHandler installs virt-handler as virt-operator does: what the operator installs before
// its workloads (ApplyNodeSide), then the virt-handler DaemonSet. The DaemonSet controller and the
// scheduler place its Pod; a real Node's kubelet runs it. An object already there is left as it
// is.
func ApplyVirtHandler(ctx context.Context, c *cluster.Cluster, kv *KubeVirt) error {
	if kv.Handler == nil {
		return fmt.Errorf("upstream: virt-handler: install-strategy printed no virt-handler DaemonSet")
	}
	if err := ApplyNodeSide(ctx, c, kv); err != nil {
		return err
	}
	ds := kv.Handler.DeepCopy()
	if err := c.Client.Create(ctx, ds); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("upstream: the virt-handler DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	return nil
}

// ApplyNodeSide installs what virt-operator installs before its workloads: the KubeVirt CR
// (marked Deployed, see applyKubeVirtCR) and kv.NodeSide (its PriorityClass, service accounts,
// RBAC, Services, its certificates and CA bundles), in their namespaces. A component that runs as
// its service account (ServiceAccountKubeconfig) needs them first. An object already there is left
// as it is.
func ApplyNodeSide(ctx context.Context, c *cluster.Cluster, kv *KubeVirt) error {
	if err := applyKubeVirtCR(ctx, c, kv.CR); err != nil {
		return err
	}
	for _, ns := range namespacesOf(kv) {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("upstream: namespace %s: %w", ns, err)
		}
	}
	for _, o := range kv.NodeSide {
		o := o.DeepCopy()
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("upstream: virt-operator's %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// namespacesOf are the namespaces the node side's objects name, the DaemonSet's first.
func namespacesOf(kv *KubeVirt) []string {
	seen := map[string]bool{}
	var out []string
	add := func(ns string) {
		if ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	if kv.Handler != nil {
		add(kv.Handler.Namespace)
	}
	for _, o := range kv.NodeSide {
		add(o.GetNamespace())
	}
	return out
}
