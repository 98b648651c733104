package kubevirt

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LauncherName is the generateName prefix of VMI vmi's launcher Pod (virt-launcher-<vmi>-<rand>).
func LauncherName(vmi string) string { return "virt-launcher-" + vmi + "-" }

// ConsoleEnabled reports whether vmi's launcher carries the guest-console-log sidecar.
func ConsoleEnabled(vmi *kubevirtv1.VirtualMachineInstance) bool {
	d := vmi.Spec.Domain.Devices
	if d.AutoattachSerialConsole != nil && !*d.AutoattachSerialConsole {
		return false
	}
	// The platform disables the console log cluster-wide (disableSerialConsoleLog); a VM opts in.
	return d.LogSerialConsole != nil && *d.LogSerialConsole
}

// Requests are the compute container's requests: the guest's memory and KubeVirt's overhead,
// and the vCPUs divided by the CPU allocation ratio unless the VM asks for a CPU request.
func Requests(vmi *kubevirtv1.VirtualMachineInstance) corev1.ResourceList {
	dom := vmi.Spec.Domain
	mem := resource.MustParse("1Gi")
	if q, ok := dom.Resources.Requests[corev1.ResourceMemory]; ok {
		mem = q.DeepCopy()
	} else if dom.Memory != nil && dom.Memory.Guest != nil {
		mem = dom.Memory.Guest.DeepCopy()
	}
	vcpus := int64(1)
	if c := dom.CPU; c != nil {
		vcpus = int64(max(c.Cores, 1) * max(c.Sockets, 1) * max(c.Threads, 1))
	}
	// virt-launcher's overhead: the launcher and libvirt, QEMU per vCPU, page tables.
	overhead := int64(220<<20) + vcpus*(8<<20) + mem.Value()/512
	mem.Add(*resource.NewQuantity(overhead, resource.BinarySI))
	cpu := *resource.NewMilliQuantity(vcpus*1000/cpuAllocationRatio, resource.DecimalSI)
	if q, ok := dom.Resources.Requests[corev1.ResourceCPU]; ok {
		cpu = q.DeepCopy()
	}
	return corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceCPU: cpu}
}

// oversized is a memory request no management node can hold: twice the largest allocatable.
func oversized(ctx context.Context, c client.Client) (resource.Quantity, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return resource.Quantity{}, err
	}
	largest := resource.MustParse("1Ti")
	for _, n := range nodes.Items {
		if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok && q.Cmp(largest) > 0 {
			largest = q.DeepCopy()
		}
	}
	return *resource.NewQuantity(2*largest.Value(), resource.BinarySI), nil
}

// newTemporaryLauncher is the pod KubeVirt schedules only to bind a volume waiting for its first
// consumer: the launcher's template, marked kubevirt.io/ephemeral-provisioning
// (pkg/virt-controller/services/template.go:545-548).
func newTemporaryLauncher(vmi *kubevirtv1.VirtualMachineInstance, requests corev1.ResourceList) *corev1.Pod {
	pod := newLauncher(vmi, requests)
	pod.Annotations[AnnEphemeralProvisioning] = "true"
	return pod
}

// newLauncher is the virt-launcher Pod of vmi.
func newLauncher(vmi *kubevirtv1.VirtualMachineInstance, requests corev1.ResourceList) *corev1.Pod {
	labels := copyMap(vmi.Labels)
	labels[LabelApp], labels[LabelCreatedBy], labels[LabelDomain] = LauncherApp, string(vmi.UID), vmi.Name
	labels["vm.kubevirt.io/name"] = vmi.Name
	grace := int64(30)
	if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g + 15
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: vmi.Namespace, GenerateName: LauncherName(vmi.Name), Labels: labels,
			Annotations: map[string]string{
				"kubectl.kubernetes.io/default-container": ComputeContainer, LabelDomain: vmi.Name,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vmi, kubevirtv1.VirtualMachineInstanceGroupVersionKind)},
		},
		Spec: corev1.PodSpec{
			Hostname:                      vmi.Name,
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: ComputeContainer, Image: LauncherImage,
				Command: []string{"/usr/bin/virt-launcher-monitor", "--qemu-timeout", "297s", "--name", vmi.Name,
					"--uid", string(vmi.UID), "--namespace", vmi.Namespace, "--kubevirt-share-dir", "/var/run/kubevirt",
					"--ephemeral-disk-dir", "/var/run/kubevirt-ephemeral-disks", "--container-disk-dir", "/var/run/kubevirt/container-disks",
					"--grace-period-seconds", fmt.Sprint(grace - 15), "--hook-sidecars", "0"},
				Resources: corev1.ResourceRequirements{Requests: requests},
			}},
		},
	}
	for _, v := range vmi.Spec.Volumes {
		claim := ""
		switch {
		case v.DataVolume != nil:
			claim = v.DataVolume.Name
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		default:
			continue
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: v.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
	if ConsoleEnabled(vmi) {
		always := corev1.ContainerRestartPolicyAlways
		pod.Spec.InitContainers = []corev1.Container{{
			Name: ConsoleContainer, Image: LauncherImage, RestartPolicy: &always,
			Command: []string{"/usr/bin/tail"},
			Args:    []string{"--quiet", "-n+1", "-F", fmt.Sprintf("/var/run/kubevirt-private/%s/virt-serial0-log", vmi.UID)},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("1M")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("80M")},
			},
		}}
	}
	return pod
}

func ptr[T any](v T) *T { return &v }

// LauncherPod is the virt-launcher Pod the sim's KubeVirt makes for vmi, with the requests the
// scheduler places it by (Requests, and the console sidecar when the VMI logs its console).
func LauncherPod(vmi *kubevirtv1.VirtualMachineInstance) *corev1.Pod {
	return newLauncher(vmi, Requests(vmi))
}
