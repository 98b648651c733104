package capk

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// vmTemplate is KubevirtMachine.spec.virtualMachineTemplate.
type vmTemplate struct {
	ObjectMeta metav1.ObjectMeta             `json:"metadata,omitempty"`
	Spec       kubevirtv1.VirtualMachineSpec `json:"spec,omitempty"`
}

// newVirtualMachine builds the VM CAPK creates for km: the template's spec, CAPK's labels on the
// VM and its VMI template, DataVolume templates prefixed with the VM name (so each Machine gets
// its own disk), and the cloud-init ConfigDrive volume carrying the userdata Secret.
func newVirtualMachine(km *unstructured.Unstructured, m *clusterv1.Machine, clusterName string) (*kubevirtv1.VirtualMachine, error) {
	raw, _, _ := unstructured.NestedMap(km.Object, "spec", "virtualMachineTemplate")
	var tmpl vmTemplate
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
		return nil, fmt.Errorf("KubevirtMachine %s/%s: spec.virtualMachineTemplate: %w", km.GetNamespace(), km.GetName(), err)
	}
	name := km.GetName()
	role := "worker"
	if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp {
		role = "control-plane"
	}
	capkLabels := map[string]string{
		"kubevirt.io/vm": name, "name": name, "cluster.x-k8s.io/role": role, clusterv1.ClusterNameLabel: clusterName,
	}
	vm := &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: km.GetNamespace(), Labels: copyMap(tmpl.ObjectMeta.Labels), Annotations: copyMap(tmpl.ObjectMeta.Annotations)},
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	for k, v := range capkLabels {
		vm.Labels[k] = v
	}
	vm.Labels[LabelMachineName], vm.Labels[LabelMachineNamespace] = name, km.GetNamespace()

	vmi := &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
	if tmpl.Spec.Template != nil {
		vmi = tmpl.Spec.Template.DeepCopy()
	}
	vmi.ObjectMeta.Labels = copyMap(vmi.ObjectMeta.Labels)
	vmi.ObjectMeta.Annotations = copyMap(vmi.ObjectMeta.Annotations)
	for k, v := range capkLabels {
		vmi.ObjectMeta.Labels[k] = v
	}
	vmi.ObjectMeta.Labels[LabelMachineName], vmi.ObjectMeta.Labels[LabelMachineNamespace] = name, km.GetNamespace()
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, kubevirtv1.Volume{
		Name: "cloudinitvolume",
		VolumeSource: kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{
			UserDataSecretRef: &corev1.LocalObjectReference{Name: *m.Spec.Bootstrap.DataSecretName + "-userdata"},
		}},
	})
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, kubevirtv1.Disk{
		Name: "cloudinitvolume", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: "virtio"}},
	})
	vm.Spec.Template = vmi

	renamed := map[string]string{}
	for i := range vm.Spec.DataVolumeTemplates {
		prefixed := name + "-" + vm.Spec.DataVolumeTemplates[i].Name
		renamed[vm.Spec.DataVolumeTemplates[i].Name] = prefixed
		vm.Spec.DataVolumeTemplates[i].Name = prefixed
	}
	for i, v := range vm.Spec.Template.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil && renamed[v.PersistentVolumeClaim.ClaimName] != "":
			vm.Spec.Template.Spec.Volumes[i].PersistentVolumeClaim.ClaimName = renamed[v.PersistentVolumeClaim.ClaimName]
		case v.DataVolume != nil && renamed[v.DataVolume.Name] != "":
			vm.Spec.Template.Spec.Volumes[i].DataVolume.Name = renamed[v.DataVolume.Name]
		}
	}
	return vm, nil
}

func copyMap(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		out[k] = v
	}
	return out
}
