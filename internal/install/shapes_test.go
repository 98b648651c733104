package install

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/catalog"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// The Flux gate against Flux as Cozystack installs it (internal/fluxinstall/manifests/
// fluxcd.yaml, the same at main and v1.6.2): one Deployment flux in cozy-fluxcd, labelled
// app.kubernetes.io/version v2.8.0, whose pod runs every controller as a container. No
// Deployment named helm-controller or source-controller ever exists; the gate passes within
// seconds instead of waiting for them until the phase runs out.
func TestFluxGateAgainstTheSingleFluxDeployment(t *testing.T) {
	e := newEnv(t)
	flux, _ := catalog.Find("flux")
	e.crds(flux.CRDs[:1], "source.toolkit.fluxcd.io.yaml")
	e.namespace("cozy-fluxcd")
	d := obj("apps/v1", "Deployment", "cozy-fluxcd", "flux")
	d.SetLabels(map[string]string{"app.kubernetes.io/name": "flux", "app.kubernetes.io/part-of": "flux", "app.kubernetes.io/version": "v2.8.0"})
	var containers []any
	for name, image := range map[string]string{
		"source-controller":       "ghcr.io/fluxcd/source-controller:v1.8.0",
		"kustomize-controller":    "ghcr.io/fluxcd/kustomize-controller:v1.8.0",
		"helm-controller":         "ghcr.io/fluxcd/helm-controller:v1.5.0",
		"notification-controller": "ghcr.io/fluxcd/notification-controller:v1.8.0",
		"source-watcher":          "ghcr.io/fluxcd/source-watcher:v2.1.0",
	} {
		containers = append(containers, map[string]any{"name": name, "image": image})
	}
	sel := map[string]any{"app.kubernetes.io/name": "flux"}
	d.Object["spec"] = map[string]any{
		"selector": map[string]any{"matchLabels": sel},
		"strategy": map[string]any{"type": "Recreate"},
		"template": map[string]any{"metadata": map[string]any{"labels": sel}, "spec": map[string]any{"containers": containers}},
	}
	d = e.create(gvrDeployment, d)
	e.available(d, "True", "MinimumReplicasAvailable", "")

	pin := catalog.Pinned{Component: flux, Pin: lane.Component{Name: "flux", Version: "v2.8.0"}}
	var rec strings.Builder
	start := time.Now()
	if err := Gate(testkit.Context(t, 20*time.Second), e.dyn, pin, GateOptions{Record: &rec}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the Flux gate took %s", took)
	}
	if !strings.Contains(rec.String(), "flux                     version v2.8.0") {
		t.Fatalf("record: %q", rec.String())
	}
	for _, name := range []string{"helm-controller", "source-controller"} {
		if _, err := e.dyn.Resource(gvrDeployment).Namespace("cozy-fluxcd").Get(testkit.Context(t, 5*time.Second), name, metav1.GetOptions{}); err == nil {
			t.Fatalf("the test made a Deployment %s, which Cozystack never does", name)
		}
	}
	// A Flux whose pod lacks the helm-controller is named as such.
	if err := DeploymentRuns(testkit.Context(t, 5*time.Second), e.dyn, "cozy-fluxcd", "flux", []string{"helm-controller", "image-reflector-controller"}); err == nil ||
		!strings.Contains(err.Error(), "deployment cozy-fluxcd/flux runs no container image-reflector-controller") {
		t.Fatalf("missing container: %v", err)
	}
}

// The Kamaji control plane provider ships no Service and no webhook configuration
// (capi-providers-cpprovider/files/control-plane-components.yaml at main and v1.6.2), so its
// gate checks no webhook selector, while in the same namespace the core provider's webhooks are
// still checked. Asking the selector check of the Kamaji provider fails, which is why the
// catalog does not.
func TestKamajiProviderGateChecksNoWebhooks(t *testing.T) {
	e := newEnv(t)
	kamaji, _ := catalog.Find("capi-kamaji")
	e.crds(kamaji.CRDs, "operator.cluster.x-k8s.io.yaml")
	ns := "cozy-cluster-api"
	e.namespace(ns)
	e.provider(ns, "capi-kamaji-controller-manager", "kamaji")
	e.provider(ns, "capi-controller-manager", "cluster-api")
	e.service(ns, "capi-webhook-service", map[string]any{"cluster.x-k8s.io/provider": "cluster-api"})
	e.webhookConfig("capi-validating-webhook-configuration", ns, "capi-webhook-service")
	for _, name := range []string{"capi-kamaji-controller-manager", "capi-controller-manager"} {
		d, err := e.dyn.Resource(gvrDeployment).Namespace(ns).Get(testkit.Context(t, 5*time.Second), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.available(d, "True", "MinimumReplicasAvailable", "")
	}
	gvr := schema.GroupVersionResource{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Resource: "controlplaneproviders"}
	cp := obj("operator.cluster.x-k8s.io/v1alpha2", "ControlPlaneProvider", ns, "kamaji")
	cp.Object["spec"] = map[string]any{"version": "v0.19.0-cozystack.0"}
	e.setStatus(gvr, e.create(gvr, cp), map[string]any{"installedVersion": "v0.19.0-cozystack.0"})

	pin := catalog.Pinned{Component: kamaji, Pin: lane.Component{Name: "capi-kamaji", Version: "v0.19.0-cozystack.0"}}
	if err := Gate(testkit.Context(t, 20*time.Second), e.dyn, pin, GateOptions{}); err != nil {
		t.Fatalf("the Kamaji provider, which has no webhooks, was refused: %v", err)
	}
	err := WebhookSelectors(testkit.Context(t, 10*time.Second), e.dyn, ns, kamaji.Deployments)
	if err == nil || !strings.Contains(err.Error(), "no webhook Service in cozy-cluster-api selects only the pods of Deployment capi-kamaji-controller-manager") {
		t.Fatalf("the selector check of a provider without webhooks: %v", err)
	}
	if err := WebhookSelectors(testkit.Context(t, 10*time.Second), e.dyn, ns, []string{"capi-controller-manager"}); err != nil {
		t.Fatalf("the core provider's own webhook: %v", err)
	}
}
