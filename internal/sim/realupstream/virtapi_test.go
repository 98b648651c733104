package realupstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-e2e/framework/cluster"
	"github.com/cozystack/cozy-e2e/internal/controlplane"
	"github.com/cozystack/cozy-e2e/internal/controlplane/cptest"
	"github.com/cozystack/cozy-e2e/internal/sim/realupstream"
)

// ApplyVirtAPI installs what virt-operator installs for virt-api, on a real apiserver: the
// Deployment with the replicas the operator counts for the Nodes virt-handler marked schedulable
// (kubevirt.io/kubevirt v1.8.4 pkg/virt-operator/resource/apply/apps.go:519-545: one for one
// Node, else a tenth of them and at least two), the webhook configurations virt-api serves with
// the kubevirt-ca bundle (not virt-operator's own validator, which no virt-operator here serves),
// and the subresource APIServices.
func TestApplyVirtAPIInstallsWhatVirtOperatorDoes(t *testing.T) {
	b := findBuild(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	api := cptest.APIServer(t, controlplane.APIServerOptions{})
	c, err := cluster.New("management", api.Admin())
	if err != nil {
		t.Fatal(err)
	}
	cr, err := b.KubeVirtCR()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := b.KubeVirtInstallFor(ctx, realupstream.RealNodeKubeVirtCR(cr, "cozy-e2e.io/real-node", "cozy-e2e.io/real-node"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: realupstream.KubeVirtNamespace}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ nodes, want int32 }{{0, 2}, {1, 1}, {12, 2}, {30, 3}} {
		setSchedulableNodes(ctx, t, c, int(tc.nodes))
		if err := realupstream.ApplyVirtAPI(ctx, c, kv); err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: realupstream.KubeVirtNamespace, Name: "virt-api"}, &d); err != nil {
			t.Fatal(err)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != tc.want {
			t.Errorf("%d schedulable Nodes: virt-api replicas %v, want %d", tc.nodes, d.Spec.Replicas, tc.want)
		}
		if err := c.Client.Delete(ctx, &d); err != nil {
			t.Fatal(err)
		}
	}
	var validating admissionv1.ValidatingWebhookConfigurationList
	var mutating admissionv1.MutatingWebhookConfigurationList
	if err := c.Client.List(ctx, &validating); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.List(ctx, &mutating); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	check := func(name string, hooks []admissionv1.WebhookClientConfig) {
		got[name] = true
		for _, h := range hooks {
			if h.Service == nil || h.Service.Name != realupstream.VirtAPIService || len(h.CABundle) == 0 {
				t.Errorf("webhook configuration %s: a webhook calls %+v with %d bytes of CA bundle, want virt-api's Service and the kubevirt-ca bundle", name, h.Service, len(h.CABundle))
			}
		}
	}
	for _, w := range validating.Items {
		var cc []admissionv1.WebhookClientConfig
		for _, h := range w.Webhooks {
			cc = append(cc, h.ClientConfig)
		}
		check(w.Name, cc)
	}
	for _, w := range mutating.Items {
		var cc []admissionv1.WebhookClientConfig
		for _, h := range w.Webhooks {
			cc = append(cc, h.ClientConfig)
		}
		check(w.Name, cc)
	}
	for _, want := range []string{"virt-api-validator", "virt-api-mutator"} {
		if !got[want] {
			t.Errorf("no webhook configuration %s; installed: %v", want, got)
		}
	}
	if got["virt-operator-validator"] {
		t.Error("virt-operator's own validator is installed, with no virt-operator to serve it")
	}
	if len(kv.APIServices) == 0 {
		t.Fatal("install-strategy printed no APIService")
	}
	for _, a := range kv.APIServices {
		if bundle, _, _ := unstructured.NestedString(a.Object, "spec", "caBundle"); bundle == "" {
			t.Errorf("APIService %s without the kubevirt-ca bundle", a.GetName())
		}
	}
}

// setSchedulableNodes makes the cluster hold n Nodes labelled kubevirt.io/schedulable=true.
func setSchedulableNodes(ctx context.Context, t *testing.T, c *cluster.Cluster, n int) {
	t.Helper()
	if err := c.Client.DeleteAllOf(ctx, &corev1.Node{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{kubevirtv1.NodeSchedulable: "true"}}}
		if err := c.Client.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
}
