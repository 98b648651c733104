package kubevirt

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Launcher returns VMI vmi's virt-launcher Pod (the newest, if a migration made two), or nil;
// never the temporary pod of a volume waiting for its first consumer. virt-controller labels
// each with kubevirt.io/created-by=<VMI UID> and makes the VMI its controller; a temporary pod
// carries the annotation kubevirt.io/ephemeral-provisioning (kubevirt/kubevirt v1.8.4
// pkg/virt-controller/services/template.go).
func Launcher(ctx context.Context, c client.Reader, vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		return nil, err
	}
	var out *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, vmi) || temporary(p) {
			continue
		}
		if out == nil || p.CreationTimestamp.After(out.CreationTimestamp.Time) {
			out = p
		}
	}
	return out, nil
}

func temporary(p *corev1.Pod) bool {
	return p.Annotations[kubevirtv1.EphemeralProvisioningObject] == "true"
}

// ConsoleLog reports whether launcher pod carries the guest-console-log container, which
// virt-controller adds when the serial console log is on for the VMI (the cluster's
// disableSerialConsoleLog and the VMI's logSerialConsole decide:
// pkg/virt-controller/services/serialconsolelog.go).
func ConsoleLog(pod *corev1.Pod) bool {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == ConsoleContainer {
			return true
		}
	}
	return false
}
