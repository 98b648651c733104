package kubernetes

//lint:file-ignore SA1019 the spec reads a MachineDeployment at v1beta1 as the v1beta1 providers do, through the conversion webhook.

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// poolSpec takes the pool's join (running since the tenant phase) and checks the conformance
// contract on every worker, as the pool showed it right after it joined (join.Record): a
// pool is judged on what it did, not on the time another pool left it.
func (st *state) poolSpec(spec context.Context, p poolRun) {
	pool := p.spec.Name
	rec, err := st.await(spec, pool)
	st.s.Must(pool, err)
	res := rec.Result
	fmt.Fprintf(st.s.Log, "pool %s: %d workers joined in %s\n", pool, len(res.Workers), res.Took.Round(100_000_000))

	By("its MachineDeployment, read at v1beta2, has as many ready replicas as desired")
	md := rec.MachineDeployment
	Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(p.spec.Replicas)), "MachineDeployment %s spec.replicas", md.Name)
	Expect(md.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(p.spec.Replicas)), "MachineDeployment %s status.readyReplicas", md.Name)

	By("its bootstrap template is the kind its class calls for")
	want := p.os.BootstrapTemplate
	ref := md.Spec.Template.Spec.Bootstrap.ConfigRef
	Expect(ref.Kind).To(Equal(want.Kind), "MachineDeployment %s bootstrap.configRef.kind on class %s (os %s)", md.Name, p.spec.Class, p.os.Name)
	Expect(ref.Name).To(Equal(p.names.BootstrapTemplate()), "MachineDeployment %s bootstrap.configRef.name", md.Name)
	Expect(rec.BootstrapTemplate).NotTo(BeNil(), "%s %s", want.Kind, ref.Name)
	kmt := rec.MachineTemplate
	Expect(kmt).NotTo(BeNil(), "KubevirtMachineTemplate %s", md.Spec.Template.Spec.InfrastructureRef.Name)
	Expect(p.names.IsMachineTemplate(kmt.GetName())).To(BeTrue(), "KubevirtMachineTemplate %s is not named %s<sha6>", kmt.GetName(), p.names.MachineTemplatePrefix())
	if p.os.EFI {
		_, efi, _ := unstructured.NestedMap(kmt.Object, "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain", "firmware", "bootloader", "efi")
		Expect(efi).To(BeTrue(), "KubevirtMachineTemplate %s of a %s pool has no firmware.bootloader.efi", kmt.GetName(), p.os.Name)
	}

	By("its MachineHealthCheck exists and selects its Machines")
	mhc := rec.MachineHealthCheck
	Expect(mhc).NotTo(BeNil(), "MachineHealthCheck %s", p.names.MachineHealthCheck())
	Expect(mhc.Spec.ClusterName).To(Equal(p.names.Cluster()), "MachineHealthCheck %s clusterName", mhc.Name)
	mhcSelector, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
	Expect(err).NotTo(HaveOccurred(), "MachineHealthCheck %s selector", mhc.Name)

	Expect(rec.Machines).To(HaveLen(p.spec.Replicas), "Machines of pool %s (selector %v)", pool, p.names.Selector())
	Expect(res.Workers).To(HaveLen(p.spec.Replicas), "workers the join followed")
	for i := range rec.Machines {
		m := &rec.Machines[i]
		By("Machine " + m.Machine.Name + ": nodeRef, Ready Node, identity, annotations, kubelet version, workload pod")
		Expect(mhcSelector.Matches(labels.Set(m.Machine.Labels))).To(BeTrue(), "MachineHealthCheck %s selector %s does not select Machine %s (labels %v)",
			mhc.Name, mhcSelector, m.Machine.Name, m.Machine.Labels)
		st.checkWorker(p, m, rec.ControlPlaneVersion)
	}

	if p.os.Kubeadm {
		By("the tenant kubelet-config carries clusterDNS, the tenant CoreDNS Service's address")
		cm, dns := rec.KubeletConfig, rec.ClusterDNSService
		Expect(cm).NotTo(BeNil(), "tenant ConfigMap %s/%s", tenant.KubeletConfigNamespace, tenant.KubeletConfigName)
		Expect(dns).NotTo(BeNil(), "tenant CoreDNS Service %s/%s", tenant.CoreDNSNamespace, tenant.CoreDNSService)
		Expect(join.ClusterDNS(cm)).To(ConsistOf(dns.Spec.ClusterIP), "tenant %s/%s clusterDNS against Service %s/%s clusterIP",
			cm.Namespace, cm.Name, dns.Namespace, dns.Name)
	}
}

// checkWorker checks one Machine's worker end to end, as recorded.
func (st *state) checkWorker(p poolRun, mr *join.MachineRecord, cpVersion string) {
	m := &mr.Machine
	Expect(m.Status.NodeRef.Name).NotTo(BeEmpty(), "Machine %s has no status.nodeRef", m.Name)
	kvmName := m.Spec.InfrastructureRef.Name
	kvm := mr.KubevirtMachine
	Expect(kvm).NotTo(BeNil(), "KubevirtMachine %s of Machine %s", kvmName, m.Name)
	Expect(mr.VMI).NotTo(BeNil(), "VMI %s of KubevirtMachine %s", kvmName, kvmName)
	vmi := mr.VMI
	if p.os.EFI {
		Expect(vmi.Spec.Domain.Firmware).NotTo(BeNil(), "VMI %s of a %s pool has no firmware", vmi.Name, p.os.Name)
		Expect(vmi.Spec.Domain.Firmware.Bootloader).NotTo(BeNil(), "VMI %s of a %s pool has no bootloader", vmi.Name, p.os.Name)
		Expect(vmi.Spec.Domain.Firmware.Bootloader.EFI).NotTo(BeNil(), "VMI %s of a %s pool does not boot with EFI", vmi.Name, p.os.Name)
	}
	Expect(mr.Node).NotTo(BeNil(), "tenant Node %s (Machine %s nodeRef)", m.Status.NodeRef.Name, m.Name)
	node := mr.Node
	if p.os.NodeNamedLikeVMI {
		Expect(node.Name).To(Equal(vmi.Name), "Machine %s: a %s Node is named like its VMI", m.Name, p.os.Name)
	}
	providerID, _, _ := unstructured.NestedString(kvm.Object, "spec", "providerID")
	Expect(providerID).To(Equal(tenant.ProviderID(kvmName)), "KubevirtMachine %s spec.providerID", kvmName)
	Expect(node.Spec.ProviderID).To(Equal(tenant.ProviderID(vmi.Name)), "Node %s spec.providerID", node.Name)
	Expect(m.Spec.ProviderID).To(Equal(node.Spec.ProviderID), "Machine %s spec.providerID", m.Name)
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	Expect(ready).To(BeTrue(), "Node %s Ready", node.Name)
	Expect(node.Annotations).To(And(
		HaveKeyWithValue(tenant.AnnotationClusterName, p.names.Cluster()),
		HaveKeyWithValue(tenant.AnnotationClusterNamespace, p.names.Namespace),
		HaveKeyWithValue(tenant.AnnotationMachine, m.Name)), "Node %s Cluster API annotations", node.Name)
	kubelet := node.Status.NodeInfo.KubeletVersion
	Expect(kubelet).To(Equal(p.kubelet), "Node %s kubelet version, pool on class %s", node.Name, p.spec.Class)
	kv, err := version.ParseSemantic(kubelet)
	Expect(err).NotTo(HaveOccurred(), "Node %s kubelet version %q", node.Name, kubelet)
	cv, err := version.ParseSemantic(cpVersion)
	Expect(err).NotTo(HaveOccurred(), "tenant control plane version %q", cpVersion)
	Expect(kv.AtLeast(cv) && !kv.EqualTo(cv)).To(BeFalse(), "Node %s kubelet %s is ahead of the control plane %s", node.Name, kubelet, cpVersion)
	Expect(mr.Workload).NotTo(BeNil(), "workload pod for Node %s", node.Name)
	pod := mr.Workload
	Expect(pod.Spec.NodeName).To(Equal(node.Name), "workload pod %s nodeName", pod.Name)
	Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "workload pod %s on Node %s", pod.Name, node.Name)
	Expect(pod.Spec.Containers).To(HaveLen(1))
	Expect(pod.Spec.Containers[0].Image).To(Equal(st.s.Lane.Workload.Ref()), "workload pod %s image (pinned by digest)", pod.Name)
	for _, t := range pod.Spec.Tolerations {
		// Only what the DefaultTolerationSeconds admission plugin adds to every pod.
		Expect(t.Effect).To(Equal(corev1.TaintEffectNoExecute), "workload pod %s carries toleration %v", pod.Name, t)
		Expect(t.Key).To(BeElementOf(corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable), "workload pod %s carries toleration %v", pod.Name, t)
	}
}

// versionsSpec reads one MachineDeployment at v1beta1 and at v1beta2 and checks that the two
// agree on what both carry.
func (st *state) versionsSpec(ctx context.Context) {
	Expect(st.pools).NotTo(BeEmpty(), "the lane has no pool")
	p := st.pools[0]
	AddReportEntry("machinedeployment", p.names.MachineDeployment())
	key := types.NamespacedName{Namespace: p.names.Namespace, Name: p.names.MachineDeployment()}
	// Both reads must see one state of the object (one resourceVersion): a controller writing
	// its status between them is not a disagreement. A few tries get a consistent pair.
	var v1 clusterv1beta1.MachineDeployment
	var v2 clusterv1.MachineDeployment
	for try := 0; try < 5; try++ {
		Expect(st.s.Mgmt.Client.Get(ctx, key, &v2)).To(Succeed(), "MachineDeployment %s at v1beta2", key)
		Expect(st.s.Mgmt.Client.Get(ctx, key, &v1)).To(Succeed(), "MachineDeployment %s at v1beta1", key)
		if v1.ResourceVersion == v2.ResourceVersion {
			break
		}
	}
	Expect(v1.ResourceVersion).To(Equal(v2.ResourceVersion), "MachineDeployment %s kept changing between its two reads", key)
	Expect(v1.APIVersion).To(Or(BeEmpty(), Equal(clusterv1beta1.GroupVersion.String())))
	Expect(v1.UID).To(Equal(v2.UID), "one object")
	Expect(v1.Spec.ClusterName).To(Equal(v2.Spec.ClusterName), "clusterName")
	Expect(v1.Spec.Replicas).To(Equal(v2.Spec.Replicas), "spec.replicas")
	Expect(v1.Spec.Selector).To(Equal(v2.Spec.Selector), "spec.selector")
	Expect(v1.Spec.Template.Spec.Version).To(HaveValue(Equal(v2.Spec.Template.Spec.Version)), "template version")
	Expect(v1.Spec.Template.Spec.Bootstrap.ConfigRef).NotTo(BeNil(), "v1beta1 bootstrap.configRef")
	Expect(v1.Spec.Template.Spec.Bootstrap.ConfigRef.Kind).To(Equal(v2.Spec.Template.Spec.Bootstrap.ConfigRef.Kind), "bootstrap.configRef.kind")
	Expect(v1.Spec.Template.Spec.Bootstrap.ConfigRef.Name).To(Equal(v2.Spec.Template.Spec.Bootstrap.ConfigRef.Name), "bootstrap.configRef.name")
	Expect(v1.Spec.Template.Spec.InfrastructureRef.Name).To(Equal(v2.Spec.Template.Spec.InfrastructureRef.Name), "infrastructureRef.name")
	Expect(v1.Status.V1Beta2).NotTo(BeNil(), "v1beta1 status.v1beta2")
	Expect(v1.Status.V1Beta2.ReadyReplicas).To(Equal(v2.Status.ReadyReplicas), "ready replicas: v1beta1 status.v1beta2.readyReplicas against v1beta2 status.readyReplicas")
	// v1beta2 leaves status.replicas unset until the MachineSets report; v1beta1 reads it as 0.
	Expect(ptr.Deref(v2.Status.Replicas, 0)).To(BeEquivalentTo(v1.Status.Replicas), "status.replicas")
}
