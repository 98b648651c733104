package join_test

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/osfamily"
	"github.com/cozystack/cozy-e2e/framework/serialconsole"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
	"github.com/cozystack/cozy-e2e/internal/sim/world"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The objects of a scene, written the way their controllers would: the platform's reconcile Job,
// Cluster API, the bootstrap providers, CAPK, CDI, KubeVirt, the guest's kubelet.

// template is the pool's bootstrap template, as the reconcile Job applies it.
func (s *scene) template() {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{}}}}}
	u.SetGroupVersionKind(s.pool.OS.BootstrapTemplate)
	if s.pool.OS.Name == osfamily.Kairos {
		u.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"kubernetesVersion": "v1.35.4", "role": "worker"}}}
	} else {
		u.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"generateType": "none"}}}
	}
	u.SetNamespace(s.ns())
	u.SetName(s.pool.Names.BootstrapTemplate())
	s.must(s.c.Create(s.ctx, u))
}

// machine is a Machine the MachineSet made, its KubevirtMachine and bootstrap config not yet
// ready; vm is its (and its KubevirtMachine's, VM's and VMI's) name.
func (s *scene) machine(suffix string) string {
	name := s.pool.Names.MachineDeployment() + "-5c7d9-" + suffix
	boot := s.pool.OS.BootstrapConfig
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns(), Name: name, Labels: s.pool.Names.Selector()},
		Spec: clusterv1.MachineSpec{
			ClusterName: s.pool.Names.Cluster(),
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: boot.Group, Kind: boot.Kind, Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: tenant.KubevirtMachineGVK.Group,
				Kind: tenant.KubevirtMachineGVK.Kind, Name: name},
		},
	}
	s.must(s.c.Create(s.ctx, m))
	cfg := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"generateType": "none"}}}
	if s.pool.OS.Name == osfamily.Kairos {
		cfg.Object["spec"] = map[string]any{"kubernetesVersion": "v1.35.4"}
	}
	cfg.SetGroupVersionKind(boot)
	cfg.SetNamespace(s.ns())
	cfg.SetName(name)
	s.must(s.c.Create(s.ctx, cfg))
	kvm := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	kvm.SetGroupVersionKind(tenant.KubevirtMachineGVK)
	kvm.SetNamespace(s.ns())
	kvm.SetName(name)
	s.must(s.c.Create(s.ctx, kvm))
	return name
}

// remove deletes vm's Machine, bootstrap config, KubevirtMachine and DataVolume, as a
// MachineHealthCheck remediation ends with (the MachineSet then makes a replacement).
func (s *scene) remove(vm string) {
	s.must(s.c.Delete(s.ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns(), Name: vm}}))
	for _, gvk := range []schema.GroupVersionKind{s.pool.OS.BootstrapConfig, tenant.KubevirtMachineGVK} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(s.ns())
		u.SetName(vm)
		s.must(s.c.Delete(s.ctx, u))
	}
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns(), Name: tenant.DataVolume(vm)}}
	if err := s.c.Delete(s.ctx, dv); err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatal(err)
	}
}

// bootstrapData is the bootstrap provider's Secret reaching the Machine.
func (s *scene) bootstrapData(vm string) {
	var m clusterv1.Machine
	s.must(s.c.Get(s.ctx, types.NamespacedName{Namespace: s.ns(), Name: vm}, &m))
	data := vm + "-bootstrap"
	m.Spec.Bootstrap.DataSecretName = &data
	s.must(s.c.Update(s.ctx, &m))
}

// importing is vm's bootstrap data reaching it and its DataVolume importing, at progress.
func (s *scene) importing(vm, progress string) {
	s.bootstrapData(vm)
	s.dataVolume(vm, cdiv1.ImportInProgress, progress)
}

// failStatus sets status.failureReason/failureMessage on a provider object.
func (s *scene) failStatus(gvk interface{ String() string }, kind, vm, reason, msg string) {
	u := &unstructured.Unstructured{}
	switch kind {
	case "KubevirtMachine":
		u.SetGroupVersionKind(tenant.KubevirtMachineGVK)
	default:
		u.SetGroupVersionKind(s.pool.OS.BootstrapConfig)
	}
	s.must(s.c.Get(s.ctx, types.NamespacedName{Namespace: s.ns(), Name: vm}, u))
	u.Object["status"] = map[string]any{"failureReason": reason, "failureMessage": msg}
	s.must(s.c.Status().Update(s.ctx, u))
}

// clearStatus empties the status of a provider object, as a provider whose reconcile succeeded.
func (s *scene) clearStatus(kind, vm string) {
	u := &unstructured.Unstructured{}
	switch kind {
	case "KubevirtMachine":
		u.SetGroupVersionKind(tenant.KubevirtMachineGVK)
	default:
		u.SetGroupVersionKind(s.pool.OS.BootstrapConfig)
	}
	s.must(s.c.Get(s.ctx, types.NamespacedName{Namespace: s.ns(), Name: vm}, u))
	u.Object["status"] = map[string]any{}
	s.must(s.c.Status().Update(s.ctx, u))
}

// dataVolume is CAPK's DataVolume of vm, with CDI's status.
func (s *scene) dataVolume(vm string, phase cdiv1.DataVolumePhase, progress string, conds ...cdiv1.DataVolumeCondition) {
	key := types.NamespacedName{Namespace: s.ns(), Name: tenant.DataVolume(vm)}
	var dv cdiv1.DataVolume
	if err := s.c.Get(s.ctx, key, &dv); err != nil {
		dv = cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: testkit.Ptr("docker://example.invalid/kairos@sha256:" + strings.Repeat("0", 64))}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}}}}}
		s.must(s.c.Create(s.ctx, &dv))
	}
	dv.Status = cdiv1.DataVolumeStatus{Phase: phase, Progress: cdiv1.DataVolumeProgress(progress), Conditions: conds}
	s.must(s.c.Status().Update(s.ctx, &dv))
}

// vmi is KubeVirt's VMI of vm in phase, on the pod network address ip.
func (s *scene) vmi(vm string, phase kubevirtv1.VirtualMachineInstancePhase, ip string) {
	key := types.NamespacedName{Namespace: s.ns(), Name: vm}
	var v kubevirtv1.VirtualMachineInstance
	if err := s.c.Get(s.ctx, key, &v); err != nil {
		v = kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{}}}}
		s.must(s.c.Create(s.ctx, &v))
	}
	v.Status.Phase = phase
	v.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: ip, IPs: []string{ip}}}
	s.must(s.c.Status().Update(s.ctx, &v))
}

// launcher is KubeVirt's virt-launcher Pod of vm (compute and guest-console-log), asking for
// memory; the real scheduler places it and kwok runs it.
func (s *scene) launcher(vm, memory string) string {
	var vmi kubevirtv1.VirtualMachineInstance
	s.must(s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns(), Name: vm}, &vmi))
	// The apiserver cuts a generateName base to 58 characters (k8s.io/apiserver
	// pkg/storage/names/generate.go), as it does for KubeVirt's virt-launcher-<vmi>-.
	base := tenant.LauncherPrefix + vm + "-"
	if len(base) > 58 {
		base = base[:58]
	}
	name := base + "x7k2p"
	for _, ct := range []string{"compute", serialconsole.LogContainer} {
		_, err := s.w.ContainerLog(s.ns(), name, ct)
		s.must(err)
	}
	s.must(s.c.Create(s.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns(), Name: name, Labels: map[string]string{tenant.LabelCreatedBy: string(vmi.UID), "kubevirt.io": "virt-launcher"}},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{
				{Name: "compute", Image: "virt-launcher", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}}},
				{Name: serialconsole.LogContainer, Image: "virt-launcher"},
			}},
	}))
	return name
}

// console appends lines to the serial console of launcher pod.
func (s *scene) console(pod string, lines ...string) {
	path, err := s.w.ContainerLog(s.ns(), pod, serialconsole.LogContainer)
	s.must(err)
	s.must(simenv.WriteContainerLog(path, time.Now(), lines...))
}

// node is the guest's kubelet registering Node name at InternalIP ip, with its host name as a
// kubelet reports both; kwok plays its kubelet (and would write the addresses over, were one of
// them missing).
func (s *scene) node(name, ip string, taints ...corev1.Taint) {
	s.must(s.c.Create(s.ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{world.KwokNodeAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "v1.35.4"},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}))
}

// withClusterDNS is Kamaji's kubelet-config of a control plane with dnsServiceIPs.
const withClusterDNS = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n- 10.95.0.10\n"

// kubeletConfig is Kamaji writing the tenant's kube-system/kubelet-config.
func (s *scene) kubeletConfig(body string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.KubeletConfigNamespace, Name: tenant.KubeletConfigName}}
	s.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := s.c.Get(s.ctx, client.ObjectKeyFromObject(cm), cm)
		cm.Data = map[string]string{tenant.KubeletConfigKey: body}
		if err != nil {
			return s.c.Create(s.ctx, cm)
		}
		return s.c.Update(s.ctx, cm)
	}))
}

// providerID is CAPK patching the Node of the VMI's name.
func (s *scene) providerID(node, id string) {
	s.updateNode(node, func(n *corev1.Node) { n.Spec.ProviderID = id })
}

// updateNode changes Node name as a controller does: read, change, write, again on a conflict
// (kwok writes the Node's status all along).
func (s *scene) updateNode(name string, change func(*corev1.Node)) {
	s.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Node
		if err := s.c.Get(s.ctx, types.NamespacedName{Name: name}, &n); err != nil {
			return err
		}
		change(&n)
		return s.c.Update(s.ctx, &n)
	}))
}

// link is the Machine controller: nodeRef on the Machine, its annotations on the Node.
func (s *scene) link(vm, node string) {
	var m clusterv1.Machine
	s.must(s.c.Get(s.ctx, types.NamespacedName{Namespace: s.ns(), Name: vm}, &m))
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	s.must(s.c.Status().Update(s.ctx, &m))
	s.updateNode(node, func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[tenant.AnnotationClusterName] = s.pool.Names.Cluster()
		n.Annotations[tenant.AnnotationClusterNamespace] = s.ns()
		n.Annotations[tenant.AnnotationMachine] = vm
	})
}

func (s *scene) ip() string {
	s.n++
	return fmt.Sprintf("10.77.%d.%d", s.n/200, s.n%200+10)
}
