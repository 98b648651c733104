package vmsize_test

import (
	"encoding/json"
	"testing"

	admissionapi "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/sim/vmsize"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// Under vmi-unschedulable@big a KubevirtMachine of pool big is admitted with twice the largest
// Node's memory as its guest's and its request; one of pool small is admitted as Cluster API
// made it. With no pool named, a Kairos pool's is sized too. The webhook reads the Nodes and the
// MachineSets from a real apiserver.
func TestATargetedPoolsMachinesOutgrowEveryNode(t *testing.T) {
	e := simtest.Start(t)
	ctx := t.Context()
	c := e.Cluster.Client
	testkit.Must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t"}}))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	testkit.Must(t, c.Create(ctx, node))
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Gi")}
	testkit.Must(t, c.Status().Update(ctx, node))
	for _, ms := range []struct{ pool, kind string }{{"big", "TalosConfig"}, {"small", "TalosConfig"}, {"kw", "KairosConfig"}} {
		testkit.Must(t, c.Create(ctx, &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "kubernetes-x-" + ms.pool + "-abcde"},
			Spec: clusterv1.MachineSetSpec{ClusterName: "kubernetes-x", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"p": ms.pool}},
				Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"p": ms.pool}}, Spec: clusterv1.MachineSpec{
					ClusterName: "kubernetes-x",
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: names.TalosConfigGVK.Group, Kind: ms.kind + "Template", Name: "x"}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: names.KubevirtMachineGVK.Group, Kind: "KubevirtMachineTemplate", Name: "x"},
				}}}}))
	}
	admit := func(spec, pool string) (guest, request string) {
		t.Helper()
		env := simtest.SimEnv(t, e.Dir, spec, nil)
		km := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"virtualMachineTemplate": map[string]any{
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"domain": map[string]any{
				"resources": map[string]any{"requests": map[string]any{"memory": "4Gi"}},
				"memory":    map[string]any{"guest": "4Gi"}}}}}}}}}
		km.SetGroupVersionKind(names.KubevirtMachineGVK)
		km.SetNamespace("t")
		km.SetName("kubernetes-x-" + pool + "-abcde-fghij")
		km.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "kubernetes-x", clusterv1.MachineDeploymentNameLabel: "kubernetes-x-" + pool})
		km.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: "kubernetes-x-" + pool + "-abcde", UID: "u"}})
		raw, err := km.MarshalJSON()
		testkit.Must(t, err)
		resp := vmsize.Webhook(e.Cluster.Client, env).Handler.Handle(ctx, admission.Request{AdmissionRequest: admissionapi.AdmissionRequest{
			Operation: admissionapi.Create, Namespace: "t", Object: runtime.RawExtension{Raw: raw}}})
		if !resp.Allowed {
			t.Fatalf("%s: pool %s's KubevirtMachine was refused: %+v", spec, pool, resp.Result)
		}
		guest, request = "4Gi", "4Gi"
		for _, p := range resp.Patches {
			js, _ := json.Marshal(p.Value)
			switch {
			case p.Path == "/spec/virtualMachineTemplate/spec/template/spec/domain/memory/guest":
				guest = string(js)
			case p.Path == "/spec/virtualMachineTemplate/spec/template/spec/domain/resources/requests/memory":
				request = string(js)
			}
		}
		return guest, request
	}
	if g, r := admit("vmi-unschedulable@big", "big"); g != `"64Gi"` || r != `"64Gi"` {
		t.Errorf("the targeted pool's guest memory is %s and its request %s, want \"64Gi\" (twice the Node's 32Gi)", g, r)
	}
	if g, r := admit("vmi-unschedulable@big", "small"); g != "4Gi" || r != "4Gi" {
		t.Errorf("another pool's guest memory was patched to %s, its request to %s", g, r)
	}
	if g, _ := admit("vmi-unschedulable", "kw"); g != `"64Gi"` {
		t.Errorf("under vmi-unschedulable (every pool) a Kairos pool's guest memory is %s, want \"64Gi\"", g)
	}
}
