package vmsize_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/cozy-e2e/internal/sim/names"
	"github.com/cozystack/cozy-e2e/internal/sim/simtest"
	"github.com/cozystack/cozy-e2e/internal/sim/vmsize"
)

// Under vmi-unschedulable a targeted pool's KubevirtMachine asks for twice the largest Node's
// memory as its guest's; another pool's is left as Cluster API made it.
func TestATargetedPoolsMachinesOutgrowEveryNode(t *testing.T) {
	e := simtest.Start(t)
	env := simtest.SimEnv(t, e.Dir, "vmi-unschedulable@big", nil)
	e.Manager(t, func(m manager.Manager) error { return vmsize.Setup(m, env) })
	ctx := t.Context()
	c := e.Cluster.Client
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t"}}))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	must(t, c.Create(ctx, node))
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Gi")}
	must(t, c.Status().Update(ctx, node))
	for _, pool := range []string{"big", "small"} {
		name := "kubernetes-x-" + pool + "-abcde-fghij"
		must(t, c.Create(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name,
			Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: "kubernetes-x-" + pool}},
			Spec: clusterv1.MachineSpec{ClusterName: "kubernetes-x",
				Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: names.TalosConfigGVK.Group, Kind: "TalosConfig", Name: name}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: names.KubevirtMachineGVK.Group, Kind: "KubevirtMachine", Name: name}}}))
		km := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"virtualMachineTemplate": map[string]any{
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"domain": map[string]any{
				"devices": map[string]any{}, "memory": map[string]any{"guest": "4Gi"}}}}}}}}}
		km.SetGroupVersionKind(names.KubevirtMachineGVK)
		km.SetNamespace("t")
		km.SetName(name)
		must(t, c.Create(ctx, km))
	}
	guest := func(name string) string {
		km := &unstructured.Unstructured{}
		km.SetGroupVersionKind(names.KubevirtMachineGVK)
		if err := c.Get(ctx, client.ObjectKey{Namespace: "t", Name: name}, km); err != nil {
			return err.Error()
		}
		s, _, _ := unstructured.NestedString(km.Object, "spec", "virtualMachineTemplate", "spec", "template", "spec", "domain", "memory", "guest")
		return s
	}
	big, small := "kubernetes-x-big-abcde-fghij", "kubernetes-x-small-abcde-fghij"
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return guest(big) == "64Gi", nil
	})
	if err != nil {
		t.Fatalf("the targeted pool's guest memory is %s, want 64Gi (twice the Node's 32Gi)", guest(big))
	}
	if got := guest(small); got != "4Gi" {
		t.Errorf("another pool's guest memory changed to %s", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
