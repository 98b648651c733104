package kind

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/install/assumptions"
)

// An assigned LoadBalancer address no node announces is named with the reason MetalLB's
// layer-2 speaker skips each node: no speaker, then kubeadm's exclude label on the only node
// (the state the kind lane was in before the label was removed), then a node that may announce
// (nothing to say).
func TestUnannouncedNamesWhyNoNodeAnnounces(t *testing.T) {
	api := cptest.APIServer(t, controlplane.APIServerOptions{Name: "kind"})
	c, err := cluster.New("kind", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kube := c.Kube
	check := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x-control-plane", Labels: map[string]string{
		assumptions.ControlPlaneLabel: "", assumptions.ExcludeFromExternalLBLabel: ""}}}
	if node, err = kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	check(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: assumptions.MetalLBNamespace}}, metav1.CreateOptions{}))
	check(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-root"}}, metav1.CreateOptions{}))
	// No controller manager here makes the namespace's default ServiceAccount, which admission wants.
	check(kube.CoreV1().ServiceAccounts(assumptions.MetalLBNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}))
	svc := tenantLB("tenant-root", "kubernetes-t1")
	svc, err = kube.CoreV1().Services("tenant-root").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.255.200"}}
	check(kube.CoreV1().Services("tenant-root").UpdateStatus(ctx, svc, metav1.UpdateOptions{}))
	why := Unannounced(kube)

	got := why(ctx, "tenant-root", "kubernetes-t1-admin-kubeconfig")
	for _, want := range []string{"MetalLB assigned 172.18.255.200 to Service tenant-root/kubernetes-t1-e2e-lb, but no node announces it",
		"no MetalLB speaker pod (app.kubernetes.io/component=speaker in cozy-metallb) is Ready on any node (0 pods found)", "x-control-plane: no Ready speaker pod"} {
		if !strings.Contains(got, want) {
			t.Errorf("no speaker: want %q in %q", want, got)
		}
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "metallb-speaker-abcde", Namespace: assumptions.MetalLBNamespace,
		Labels: map[string]string{"app.kubernetes.io/component": "speaker"}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker:v0.16.1"}}}}
	if pod, err = kube.CoreV1().Pods(assumptions.MetalLBNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	check(kube.CoreV1().Pods(assumptions.MetalLBNamespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}))
	got = why(ctx, "tenant-root", "kubernetes-t1-admin-kubeconfig")
	want := "x-control-plane: carries node.kubernetes.io/exclude-from-external-load-balancers, and the platform's MetalLB chart leaves speaker.ignoreExcludeLB false (remove the label: kubectl label node x-control-plane node.kubernetes.io/exclude-from-external-load-balancers-)"
	if !strings.Contains(got, want) || strings.Contains(got, "no MetalLB speaker pod") {
		t.Errorf("every node excluded: want %q, got %q", want, got)
	}

	delete(node.Labels, assumptions.ExcludeFromExternalLBLabel)
	check(kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}))
	if got := why(ctx, "tenant-root", "kubernetes-t1-admin-kubeconfig"); got != "" {
		t.Errorf("a node may announce: want nothing said, got %q", got)
	}
}
