package kubernetes

import (
	"context"
	"errors"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/join"
	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// mdV1beta2 is the MachineDeployment kind at v1beta2, named explicitly: never the preferred version.
var mdV1beta2 = clusterv1.GroupVersion.WithKind("MachineDeployment")

// poolSpec waits for the pool's join (running since the tenant phase) and then checks the
// conformance contract on every worker.
func (st *state) poolSpec(spec context.Context, p poolRun) {
	pool := p.spec.Name
	res, err := st.await(spec, pool)
	st.s.Must(pool, err)
	fmt.Fprintf(st.s.Log, "pool %s: %d workers joined in %s\n", pool, len(res.Workers), res.Took.Round(100_000_000))
	ctx, cancel := st.poolsContext(spec)
	defer cancel()

	By("its MachineDeployment, read at v1beta2, has as many ready replicas as desired")
	md := st.machineDeployment(ctx, p)
	Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(p.spec.Replicas)), "MachineDeployment %s spec.replicas", md.Name)
	Expect(md.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(p.spec.Replicas)), "MachineDeployment %s status.readyReplicas", md.Name)

	By("its bootstrap template is the kind its class calls for")
	want := tenant.BootstrapTemplateGVK(p.os)
	ref := md.Spec.Template.Spec.Bootstrap.ConfigRef
	Expect(ref.Kind).To(Equal(want.Kind), "MachineDeployment %s bootstrap.configRef.kind on class %s (os %s)", md.Name, p.spec.Class, p.os)
	Expect(ref.Name).To(Equal(p.names.BootstrapTemplate()), "MachineDeployment %s bootstrap.configRef.name", md.Name)
	Expect(get(ctx, st.s.Mgmt.Client, want, p.names.Namespace, ref.Name)).NotTo(BeNil(), "%s %s", want.Kind, ref.Name)
	kmt := get(ctx, st.s.Mgmt.Client, tenant.KubevirtMachineTemplateGVK, p.names.Namespace, md.Spec.Template.Spec.InfrastructureRef.Name)
	Expect(kmt).NotTo(BeNil(), "KubevirtMachineTemplate %s", md.Spec.Template.Spec.InfrastructureRef.Name)
	Expect(p.names.IsMachineTemplate(kmt.GetName())).To(BeTrue(), "KubevirtMachineTemplate %s is not named %s<sha6>", kmt.GetName(), p.names.MachineTemplatePrefix())
	if p.os == tenant.OSKairos {
		_, efi, _ := unstructured.NestedMap(kmt.Object, "spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain", "firmware", "bootloader", "efi")
		Expect(efi).To(BeTrue(), "KubevirtMachineTemplate %s of a Kairos pool has no firmware.bootloader.efi", kmt.GetName())
	}

	By("its MachineHealthCheck exists and selects its Machines")
	var mhc clusterv1.MachineHealthCheck
	Expect(st.api(p.spec.Name, st.s.Mgmt.Client.Get(ctx, types.NamespacedName{Namespace: p.names.Namespace, Name: p.names.MachineHealthCheck()}, &mhc))).To(Succeed(),
		"MachineHealthCheck %s", p.names.MachineHealthCheck())
	Expect(mhc.Spec.ClusterName).To(Equal(p.names.Cluster()), "MachineHealthCheck %s clusterName", mhc.Name)
	mhcSelector, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
	Expect(err).NotTo(HaveOccurred(), "MachineHealthCheck %s selector", mhc.Name)

	cpVersion, err := st.tenant.Kube.Discovery().ServerVersion()
	Expect(err).NotTo(HaveOccurred(), "tenant control plane version")
	machines := st.machines(ctx, p)
	Expect(machines).To(HaveLen(p.spec.Replicas), "Machines of pool %s (selector %v)", pool, p.names.Selector())
	Expect(res.Workers).To(HaveLen(p.spec.Replicas), "workers the join followed")
	for i := range machines {
		m := &machines[i]
		By("Machine " + m.Name + ": nodeRef, Ready Node, identity, annotations, kubelet version, workload pod")
		Expect(mhcSelector.Matches(labels.Set(m.Labels))).To(BeTrue(), "MachineHealthCheck %s selector %s does not select Machine %s (labels %v)",
			mhc.Name, mhcSelector, m.Name, m.Labels)
		st.checkWorker(ctx, p, m, cpVersion.GitVersion)
	}

	if tenant.KubeadmJoined(p.os) {
		By("the tenant kubelet-config carries clusterDNS, the tenant CoreDNS Service's address")
		var cm corev1.ConfigMap
		Expect(st.api(p.spec.Name, st.tenant.Client.Get(ctx, types.NamespacedName{Namespace: tenant.KubeletConfigNamespace, Name: tenant.KubeletConfigName}, &cm))).To(Succeed())
		var dns corev1.Service
		Expect(st.api(p.spec.Name, st.tenant.Client.Get(ctx, types.NamespacedName{Namespace: tenant.CoreDNSNamespace, Name: tenant.CoreDNSService}, &dns))).To(Succeed(),
			"tenant CoreDNS Service %s/%s", tenant.CoreDNSNamespace, tenant.CoreDNSService)
		Expect(join.ClusterDNS(&cm)).To(ConsistOf(dns.Spec.ClusterIP), "tenant %s/%s clusterDNS against Service %s/%s clusterIP",
			cm.Namespace, cm.Name, dns.Namespace, dns.Name)
	}
}

// checkWorker checks one Machine's worker end to end.
func (st *state) checkWorker(ctx context.Context, p poolRun, m *clusterv1.Machine, cpVersion string) {
	mgmt := st.s.Mgmt.Client
	ns := p.names.Namespace
	Expect(m.Status.NodeRef.Name).NotTo(BeEmpty(), "Machine %s has no status.nodeRef", m.Name)
	kvmName := m.Spec.InfrastructureRef.Name
	kvm := get(ctx, mgmt, tenant.KubevirtMachineGVK, ns, kvmName)
	Expect(kvm).NotTo(BeNil(), "KubevirtMachine %s of Machine %s", kvmName, m.Name)
	var vmi kubevirtv1.VirtualMachineInstance
	Expect(mgmt.Get(ctx, types.NamespacedName{Namespace: ns, Name: kvmName}, &vmi)).To(Succeed(), "VMI %s of KubevirtMachine %s", kvmName, kvmName)
	if p.os == tenant.OSKairos {
		Expect(vmi.Spec.Domain.Firmware).NotTo(BeNil(), "VMI %s of a Kairos pool has no firmware", vmi.Name)
		Expect(vmi.Spec.Domain.Firmware.Bootloader).NotTo(BeNil(), "VMI %s of a Kairos pool has no bootloader", vmi.Name)
		Expect(vmi.Spec.Domain.Firmware.Bootloader.EFI).NotTo(BeNil(), "VMI %s of a Kairos pool does not boot with EFI", vmi.Name)
	}
	var node corev1.Node
	Expect(st.api(p.spec.Name, st.tenant.Client.Get(ctx, types.NamespacedName{Name: m.Status.NodeRef.Name}, &node))).To(Succeed(), "tenant Node %s (Machine %s nodeRef)", m.Status.NodeRef.Name, m.Name)
	Expect(node.Name).To(Equal(vmi.Name), "Machine %s: Node named like its VMI", m.Name)
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
		HaveKeyWithValue(tenant.AnnotationClusterNamespace, ns),
		HaveKeyWithValue(tenant.AnnotationMachine, m.Name)), "Node %s Cluster API annotations", node.Name)
	kubelet := node.Status.NodeInfo.KubeletVersion
	Expect(kubelet).To(Equal(p.kubelet), "Node %s kubelet version, pool on class %s", node.Name, p.spec.Class)
	kv, err := version.ParseSemantic(kubelet)
	Expect(err).NotTo(HaveOccurred(), "Node %s kubelet version %q", node.Name, kubelet)
	cv, err := version.ParseSemantic(cpVersion)
	Expect(err).NotTo(HaveOccurred(), "tenant control plane version %q", cpVersion)
	Expect(kv.AtLeast(cv) && !kv.EqualTo(cv)).To(BeFalse(), "Node %s kubelet %s is ahead of the control plane %s", node.Name, kubelet, cpVersion)
	var pod corev1.Pod
	Expect(st.api(p.spec.Name, st.tenant.Client.Get(ctx, types.NamespacedName{Namespace: tenant.WorkloadNamespace, Name: tenant.WorkloadPod(node.Name)}, &pod))).To(Succeed(),
		"workload pod for Node %s", node.Name)
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

// machineDeployment waits, watch-driven, until the pool's MachineDeployment read at v1beta2
// reports as many ready replicas as the pool wants, and returns it.
func (st *state) machineDeployment(ctx context.Context, p poolRun) *clusterv1.MachineDeployment {
	ref := tenant.Ref{GVK: mdV1beta2, Namespace: p.names.Namespace, Name: p.names.MachineDeployment()}
	st.s.Must(p.spec.Name, tenant.Wait(ctx, st.s.Mgmt, tenant.WaitOptions{Phase: "pools", What: "MachineDeployment " + ref.Name + " ready replicas",
		Watch: []tenant.Ref{ref}, Log: st.s.Log,
		Judge: func(objs tenant.Objects) (bool, string, error) {
			md := objs.Get(ref)
			if md == nil {
				return false, "not found", nil
			}
			ready, _, _ := unstructured.NestedInt64(md.Object, "status", "readyReplicas")
			want, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
			return ready == want && want == int64(p.spec.Replicas),
				fmt.Sprintf("readyReplicas %d, spec.replicas %d, pool replicas %d", ready, want, p.spec.Replicas), nil
		}}))
	var md clusterv1.MachineDeployment
	Expect(st.api(p.spec.Name, st.s.Mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &md))).To(Succeed())
	return &md
}

// machines are the pool's Machines at v1beta2, those being deleted left out.
func (st *state) machines(ctx context.Context, p poolRun) []clusterv1.Machine {
	var list clusterv1.MachineList
	Expect(st.api(p.spec.Name, st.s.Mgmt.Client.List(ctx, &list, client.InNamespace(p.names.Namespace), p.names.Selector()))).To(Succeed())
	var out []clusterv1.Machine
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil {
			out = append(out, m)
		}
	}
	return out
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
		Expect(st.api(p.spec.Name, st.s.Mgmt.Client.Get(ctx, key, &v2))).To(Succeed(), "MachineDeployment %s at v1beta2", key)
		Expect(st.api(p.spec.Name, st.s.Mgmt.Client.Get(ctx, key, &v1))).To(Succeed(), "MachineDeployment %s at v1beta1", key)
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
	Expect(v2.Status.Replicas).To(HaveValue(BeEquivalentTo(v1.Status.Replicas)), "status.replicas")
}

// get reads gvk namespace/name as unstructured; nil when it does not exist.
func get(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred(), "reading %s %s/%s", gvk.Kind, ns, name)
	return u
}

// api routes a read that ran out of the pools phase's time to a deadline failure of pool; any
// other error is returned for the spec to judge (a missing object is a product failure).
func (st *state) api(pool string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		st.s.MustIn("pools", pool, err)
	}
	return err
}
