package diag

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/cozy-e2e/framework/tenant"
)

// obj is a management object of kind as its controller writes it: labels, owners, a UID.
func obj(kind, name, uid string, labels map[string]string, owners ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetKind(kind)
	u.SetNamespace("tenant-x")
	u.SetName(name)
	u.SetUID(types.UID(uid))
	u.SetLabels(labels)
	for i, o := range owners {
		ctl := i == 0
		u.SetOwnerReferences(append(u.GetOwnerReferences(), metav1.OwnerReference{Kind: "Owner", Name: o, UID: types.UID(o), Controller: &ctl}))
	}
	return u
}

func capiLabels(pn tenant.PoolNames) map[string]string {
	return map[string]string{"cluster.x-k8s.io/cluster-name": pn.Cluster(), "cluster.x-k8s.io/deployment-name": pn.MachineDeployment()}
}

// Apps a and a-b in one namespace: every object of app a-b's pool md1 begins with the name of
// app a's pool b (kubernetes-a-b). Each object goes where Cluster API's labels, CAPK's VM
// label and the owner references send it, down to the importer and the launcher, and app a-b's
// objects never reach pool b of app a, whether or not app a-b's pool is watched.
func TestObjectsAreAttributedByOwnershipNotByName(t *testing.T) {
	ab := tenant.For("tenant-x", "a").Pool("b")
	md1 := tenant.For("tenant-x", "a-b").Pool("md1")
	p := &pools{}
	p.add(ab)
	m := md1.MachineDeployment() + "-abcde-fghij"
	chain := []*unstructured.Unstructured{
		obj("Machine", m, "u-machine", capiLabels(md1), "u-ms"),
		obj(tenant.KubevirtMachineGVK.Kind, m, "u-km", capiLabels(md1), "u-machine"),
		obj("VirtualMachine", m, "u-vm", map[string]string{"kubevirt.io/vm": m, "cluster.x-k8s.io/cluster-name": md1.Cluster()}),
		obj("VirtualMachineInstance", m, "u-vmi", map[string]string{"kubevirt.io/vm": m}, "u-vm"),
		obj("Pod", "virt-launcher-"+m+"-x1y2z", "u-launcher", map[string]string{tenant.LabelCreatedBy: "u-vmi"}, "u-vmi"),
		obj("DataVolume", tenant.DataVolume(m), "u-dv", nil, "u-vm"),
		obj("PersistentVolumeClaim", tenant.DataVolume(m), "u-pvc", nil, "u-dv"),
		obj("Pod", tenant.ImporterPod(tenant.DataVolume(m)), "u-importer", nil, "u-pvc"),
		obj("KubevirtCluster", md1.Cluster(), "u-kc", map[string]string{"cluster.x-k8s.io/cluster-name": md1.Cluster()}),
		obj("TenantControlPlane", ab.MachineDeployment(), "u-tcp", nil),
	}
	for _, u := range chain {
		p.learn(Management, u.GetKind(), u, false)
	}
	for _, u := range chain {
		if pn, ok := p.of(Management, u.GetKind(), u); ok {
			t.Errorf("%s %s of app a-b filed under pool %s of %s", u.GetKind(), u.GetName(), pn.Pool, pn.Release())
		}
	}
	p.add(md1)
	for _, u := range chain[:8] {
		if pn, ok := p.of(Management, u.GetKind(), u); !ok || pn != md1 {
			t.Errorf("%s %s: attributed to %+v (%v), want pool md1 of app a-b", u.GetKind(), u.GetName(), pn, ok)
		}
	}
	if pn, ok := p.ofRef(Management, "Pod", "tenant-x", "virt-launcher-"+m+"-x1y2z", "u-launcher"); !ok || pn != md1 {
		t.Errorf("an event of the launcher: %+v %v", pn, ok)
	}
	if pn, ok := p.ofRef(Management, "VirtualMachineInstance", "tenant-x", m, ""); !ok || pn != md1 {
		t.Errorf("a VMI by name (a console): %+v %v", pn, ok)
	}
	md := obj("MachineDeployment", ab.MachineDeployment(), "u-md", map[string]string{"cluster.x-k8s.io/cluster-name": ab.Cluster()})
	if pn, ok := p.of(Management, "MachineDeployment", md); !ok || pn != ab {
		t.Errorf("pool b's MachineDeployment: %+v %v", pn, ok)
	}
}

// A tenant Node belongs to the pool of the Machine Cluster API linked it to, else of the VMI
// its providerID names, else of the VMI whose address it reports (a Kairos metal-<id> Node
// before its providerID came); one tied to nothing belongs to no pool, and a tenant cluster's
// Nodes belong to its own app's pools only.
func TestTenantNodesAreAttributedByMachineProviderIDOrAddress(t *testing.T) {
	p1 := tenant.For("tenant-x", "a").Pool("p1")
	p2 := tenant.For("tenant-x", "a").Pool("p2")
	p := &pools{}
	p.add(p1)
	p.add(p2)
	p.setTenant("tenant", p1.Names)
	vm1, vm2 := p1.MachineDeployment()+"-aaaaa-bbbbb", p2.MachineDeployment()+"-ccccc-ddddd"
	for _, u := range []*unstructured.Unstructured{
		obj("Machine", vm1, "m1", capiLabels(p1)), obj("Machine", vm2, "m2", capiLabels(p2)),
		obj("VirtualMachineInstance", vm1, "i1", capiLabels(p1)), obj("VirtualMachineInstance", vm2, "i2", capiLabels(p2)),
	} {
		if u.GetKind() == "VirtualMachineInstance" {
			ip := map[string]string{vm1: "10.0.0.1", vm2: "10.0.0.2"}[u.GetName()]
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"ipAddress": ip, "ipAddresses": []any{ip}}}, "status", "interfaces")
		}
		p.learn(Management, u.GetKind(), u, false)
	}
	node := func(name, providerID, ip string, ann map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("n-" + name), Annotations: ann}, Spec: corev1.NodeSpec{ProviderID: providerID},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
	}
	for _, tc := range []struct {
		n    *corev1.Node
		want *tenant.PoolNames
	}{
		{node("metal-1111", "", "10.0.0.9", map[string]string{tenant.AnnotationMachine: vm2, tenant.AnnotationClusterNamespace: "tenant-x"}), &p2},
		{node("metal-2222", tenant.ProviderID(vm1), "10.0.0.9", nil), &p1},
		{node("metal-3333", "", "10.0.0.2", nil), &p2},
		{node("metal-4444", "", "10.0.0.99", nil), nil},
		{node("metal-5555", tenant.ProviderID("kubernetes-other-md0-x-y"), "10.0.0.1", nil), nil},
	} {
		pn, ok := p.of("tenant", "Node", tc.n)
		if ok != (tc.want != nil) || (ok && pn != *tc.want) {
			t.Errorf("Node %s: %+v %v, want %+v", tc.n.Name, pn, ok, tc.want)
		}
	}
	p.setTenant("tenant-other", tenant.For("tenant-x", "other"))
	if pn, ok := p.of("tenant-other", "Node", node("metal-6666", "", "10.0.0.1", nil)); ok {
		t.Errorf("another tenant cluster's Node filed under pool %s", pn.Pool)
	}
}

// A pool's identity report names the other pools' Nodes nowhere: a Kairos worker of pool p2,
// metal-<id>, is no mismatch of pool p1; a Node tied to no VMI is said to be so.
func TestAnotherPoolsNodeIsNoMismatch(t *testing.T) {
	pn := tenant.For("tenant-x", "a").Pool("p1")
	other := tenant.For("tenant-x", "a").Pool("p2")
	p := &pools{}
	p.add(pn)
	p.add(other)
	vm := pn.MachineDeployment() + "-aaaaa-bbbbb"
	vm2 := other.MachineDeployment() + "-ccccc-ddddd"
	vmi := obj("VirtualMachineInstance", vm, "i1", capiLabels(pn))
	_ = unstructured.SetNestedField(vmi.Object, "Running", "status", "phase")
	_ = unstructured.SetNestedSlice(vmi.Object, []any{map[string]any{"ipAddress": "10.0.0.1"}}, "status", "interfaces")
	p.learn(Management, "VirtualMachineInstance", vmi, false)
	p.learn(Management, "Machine", obj("Machine", vm2, "m2", capiLabels(other)), false)
	theirs := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-3f2a", UID: "n1", Annotations: map[string]string{tenant.AnnotationMachine: vm2,
		tenant.AnnotationClusterNamespace: "tenant-x", tenant.AnnotationClusterName: other.Cluster()}}}
	ours := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-77aa", UID: "n2"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}}}
	stray := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-0000", UID: "n3"}}
	owner := func(n *corev1.Node) (tenant.PoolNames, bool) { return p.of(Tenant, "Node", n) }
	rep := identityReport(pn, []unstructured.Unstructured{*vmi}, nil, []corev1.Node{theirs, ours, stray}, owner)
	if strings.Contains(rep, "metal-3f2a") {
		t.Errorf("pool p1's identity report names pool p2's Node:\n%s", rep)
	}
	if !strings.Contains(rep, "Node metal-77aa (by its address 10.0.0.1) exists; MISMATCH providerID") {
		t.Errorf("pool p1's own Kairos Node, found by its address, is not reported as such:\n%s", rep)
	}
	if !strings.Contains(rep, "Node metal-0000: tied to no VMI of any pool") {
		t.Errorf("a Node tied to nothing is not said to be so:\n%s", rep)
	}
}
