package suiterun

//lint:file-ignore SA1019 the spec reads a MachineDeployment at v1beta1 as the v1beta1 providers do, through the conversion webhook.

import (
	"context"
	"fmt"
	"io"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
	"github.com/cozystack/cozy-e2e/framework/testbed"
)

// PoolJoinSpecInput is what PoolJoinSpec checks: one pool of the testbed's tenant, whose join
// Tenant.Up started.
type PoolJoinSpecInput struct {
	Pools *testbed.Pools
	Pool  join.Pool
	// WorkloadImage is the image the workload pods run, by digest (the lane's workload).
	WorkloadImage string
	Failures      *Failures
	// Log receives a line when the pool joined; nil: none.
	Log io.Writer
}

// PoolJoinSpec registers one spec: the pool's workers joined. It takes the pool's join (running
// since the tenant phase) and checks the conformance contract on every worker as the pool
// showed it right after it joined (join.Record): its MachineDeployment counts every replica
// ready, its bootstrap template is the kind its class calls for, its MachineHealthCheck
// selects its Machines, and each worker passes ExpectWorker; a kubeadm-joined pool's
// kubelet-config carries the tenant CoreDNS Service's address.
func PoolJoinSpec(_ context.Context, inputGetter func() PoolJoinSpecInput) {
	It("joins: every worker is a Ready Node named like its VMI, with its providerID, the Cluster API annotations and a pod running on it",
		func(ctx SpecContext) {
			in := inputGetter()
			AddReportEntry(PoolEntry, in.Pool.Name())
			rec, err := in.Pools.Await(ctx, in.Pool.Name())
			Must(in.Failures, in.Pool.Name(), err)
			if in.Log != nil {
				fmt.Fprintf(in.Log, "pool %s: %d workers joined in %s\n", in.Pool.Name(), len(rec.Result.Workers), rec.Result.Took.Round(100*time.Millisecond))
			}
			ExpectPoolJoined(in.Pool, rec, in.Pool.Spec.Replicas, in.WorkloadImage)
		})
}

// ExpectPoolJoined checks a pool's record against the conformance contract for replicas
// workers: its MachineDeployment, bootstrap and machine templates, MachineHealthCheck, every
// worker (ExpectWorker) and, on a kubeadm-joined pool, the tenant's clusterDNS.
func ExpectPoolJoined(p join.Pool, rec *join.Record, replicas int, workloadImage string) {
	res := rec.Result
	By("its MachineDeployment, read at v1beta2, has as many ready replicas as desired")
	md := rec.MachineDeployment
	Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(replicas)), "MachineDeployment %s spec.replicas", md.Name)
	Expect(md.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(replicas)), "MachineDeployment %s status.readyReplicas", md.Name)

	By("its bootstrap template is the kind its class calls for")
	want := p.OS.BootstrapTemplate
	ref := md.Spec.Template.Spec.Bootstrap.ConfigRef
	Expect(ref.Kind).To(Equal(want.Kind), "MachineDeployment %s bootstrap.configRef.kind on class %s (os %s)", md.Name, p.Spec.Class, p.OS.Name)
	Expect(ref.Name).To(Equal(p.Names.BootstrapTemplate()), "MachineDeployment %s bootstrap.configRef.name", md.Name)
	Expect(rec.BootstrapTemplate).NotTo(BeNil(), "%s %s", want.Kind, ref.Name)
	kmt := rec.MachineTemplate
	Expect(kmt).NotTo(BeNil(), "KubevirtMachineTemplate %s", md.Spec.Template.Spec.InfrastructureRef.Name)
	Expect(p.Names.IsMachineTemplate(kmt.GetName())).To(BeTrue(), "KubevirtMachineTemplate %s is not named %s<sha6>", kmt.GetName(), p.Names.MachineTemplatePrefix())
	if p.OS.EFI {
		_, efi, _ := unstructured.NestedMap(kmt.Object, "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain", "firmware", "bootloader", "efi")
		Expect(efi).To(BeTrue(), "KubevirtMachineTemplate %s of a %s pool has no firmware.bootloader.efi", kmt.GetName(), p.OS.Name)
	}

	By("its MachineHealthCheck exists and selects its Machines")
	mhc := rec.MachineHealthCheck
	Expect(mhc).NotTo(BeNil(), "MachineHealthCheck %s", p.Names.MachineHealthCheck())
	Expect(mhc.Spec.ClusterName).To(Equal(p.Names.Cluster()), "MachineHealthCheck %s clusterName", mhc.Name)
	mhcSelector, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
	Expect(err).NotTo(HaveOccurred(), "MachineHealthCheck %s selector", mhc.Name)

	Expect(rec.Machines).To(HaveLen(replicas), "Machines of pool %s (selector %v)", p.Name(), p.Names.Selector())
	Expect(res.Workers).To(HaveLen(replicas), "workers the join followed")
	for i := range rec.Machines {
		m := &rec.Machines[i]
		By("Machine " + m.Machine.Name + ": nodeRef, Ready Node, identity, annotations, kubelet version, workload pod")
		Expect(mhcSelector.Matches(labels.Set(m.Machine.Labels))).To(BeTrue(), "MachineHealthCheck %s selector %s does not select Machine %s (labels %v)",
			mhc.Name, mhcSelector, m.Machine.Name, m.Machine.Labels)
		ExpectWorker(p, m, rec.ControlPlaneVersion, workloadImage)
	}

	if p.OS.Kubeadm {
		By("the tenant kubelet-config carries clusterDNS, the tenant CoreDNS Service's address")
		cm, dns := rec.KubeletConfig, rec.ClusterDNSService
		Expect(cm).NotTo(BeNil(), "tenant ConfigMap %s/%s", tenant.KubeletConfigNamespace, tenant.KubeletConfigName)
		Expect(dns).NotTo(BeNil(), "tenant CoreDNS Service %s/%s", tenant.CoreDNSNamespace, tenant.CoreDNSService)
		Expect(join.ClusterDNS(cm)).To(ConsistOf(dns.Spec.ClusterIP), "tenant %s/%s clusterDNS against Service %s/%s clusterIP",
			cm.Namespace, cm.Name, dns.Namespace, dns.Name)
	}
}

// ExpectWorker is every per-worker assertion of the join spec, on one Machine's record: its
// nodeRef, KubevirtMachine and VMI (EFI on families that boot so), a Ready Node named like its
// VMI where the family says so, the providerID kubevirt://<vmi> on KubevirtMachine, Node and
// Machine, the Cluster API annotations, the kubelet version (never ahead of the control
// plane), and the workload pod running on that very Node with no tolerations of its own.
func ExpectWorker(p join.Pool, mr *join.MachineRecord, cpVersion, workloadImage string) {
	m := &mr.Machine
	Expect(m.Status.NodeRef.Name).NotTo(BeEmpty(), "Machine %s has no status.nodeRef", m.Name)
	kvmName := m.Spec.InfrastructureRef.Name
	kvm := mr.KubevirtMachine
	Expect(kvm).NotTo(BeNil(), "KubevirtMachine %s of Machine %s", kvmName, m.Name)
	Expect(mr.VMI).NotTo(BeNil(), "VMI %s of KubevirtMachine %s", kvmName, kvmName)
	vmi := mr.VMI
	if p.OS.EFI {
		Expect(vmi.Spec.Domain.Firmware).NotTo(BeNil(), "VMI %s of a %s pool has no firmware", vmi.Name, p.OS.Name)
		Expect(vmi.Spec.Domain.Firmware.Bootloader).NotTo(BeNil(), "VMI %s of a %s pool has no bootloader", vmi.Name, p.OS.Name)
		Expect(vmi.Spec.Domain.Firmware.Bootloader.EFI).NotTo(BeNil(), "VMI %s of a %s pool does not boot with EFI", vmi.Name, p.OS.Name)
	}
	Expect(mr.Node).NotTo(BeNil(), "tenant Node %s (Machine %s nodeRef)", m.Status.NodeRef.Name, m.Name)
	node := mr.Node
	if p.OS.NodeNamedLikeVMI {
		Expect(node.Name).To(Equal(vmi.Name), "Machine %s: a %s Node is named like its VMI", m.Name, p.OS.Name)
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
		HaveKeyWithValue(tenant.AnnotationClusterName, p.Names.Cluster()),
		HaveKeyWithValue(tenant.AnnotationClusterNamespace, p.Names.Namespace),
		HaveKeyWithValue(tenant.AnnotationMachine, m.Name)), "Node %s Cluster API annotations", node.Name)
	kubelet := node.Status.NodeInfo.KubeletVersion
	Expect(kubelet).To(Equal(p.Kubelet), "Node %s kubelet version, pool on class %s", node.Name, p.Spec.Class)
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
	Expect(pod.Spec.Containers[0].Image).To(Equal(workloadImage), "workload pod %s image (pinned by digest)", pod.Name)
	for _, t := range pod.Spec.Tolerations {
		// Only what the DefaultTolerationSeconds admission plugin adds to every pod.
		Expect(t.Effect).To(Equal(corev1.TaintEffectNoExecute), "workload pod %s carries toleration %v", pod.Name, t)
		Expect(t.Key).To(BeElementOf(corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable), "workload pod %s carries toleration %v", pod.Name, t)
	}
}
