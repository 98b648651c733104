package install

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-e2e/framework/lane"
	"github.com/cozystack/cozy-e2e/internal/install/catalog"
	"github.com/cozystack/cozy-e2e/internal/testkit"
)

// provider makes a provider Deployment with its ReplicaSet and one pod, owned as the
// controllers own them, labelled with the provider label.
func (e *env) provider(ns, deployment, providerLabel string) {
	e.t.Helper()
	labels := map[string]string{"cluster.x-k8s.io/provider": providerLabel, "control-plane": "controller-manager"}
	d := e.deployment(ns, deployment, "registry.example.invalid/"+deployment+":v1", labels)
	rs := obj("apps/v1", "ReplicaSet", ns, deployment+"-5d8f7")
	rs.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment, UID: d.GetUID()}})
	spec := d.Object["spec"].(map[string]any)
	rs.Object["spec"] = map[string]any{"selector": spec["selector"], "template": spec["template"]}
	rs = e.create(gvrReplicaSet, rs)
	pod := obj("v1", "Pod", ns, deployment+"-5d8f7-abcde")
	pl := map[string]string{"app": deployment}
	for k, v := range labels {
		pl[k] = v
	}
	pod.SetLabels(pl)
	pod.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.GetName(), UID: rs.GetUID()}})
	pod.Object["spec"] = map[string]any{"containers": []any{map[string]any{"name": "manager", "image": "registry.example.invalid/" + deployment + ":v1"}}}
	e.create(gvrPod, pod)
}

func (e *env) service(ns, name string, selector map[string]any) *unstructured.Unstructured {
	e.t.Helper()
	s := obj("v1", "Service", ns, name)
	s.Object["spec"] = map[string]any{"selector": selector, "ports": []any{map[string]any{"port": int64(443), "targetPort": int64(9443)}}}
	return e.create(gvrService, s)
}

func (e *env) webhookConfig(name, ns string, services ...string) {
	e.t.Helper()
	var hooks []any
	for i, svc := range services {
		hooks = append(hooks, map[string]any{
			"name":                    "v" + string(rune('a'+i)) + ".example.invalid",
			"clientConfig":            map[string]any{"service": map[string]any{"namespace": ns, "name": svc, "path": "/validate"}},
			"admissionReviewVersions": []any{"v1"},
			"sideEffects":             "None",
			"failurePolicy":           "Ignore",
			// a group nothing serves: the webhooks never intercept the test's own requests
			"rules": []any{map[string]any{"apiGroups": []any{"example.invalid"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"things"}}},
		})
	}
	w := obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", name)
	w.Object["webhooks"] = hooks
	e.create(gvrVWebhook, w)
}

// In the namespace the providers share, a webhook Service that selects another provider's pods
// (kairos-io/kairos#5815) is named with every Deployment it reaches; once its selector carries
// the provider's label the check passes.
func TestWebhookServicesSelectOnlyTheirProvidersPods(t *testing.T) {
	e := newEnv(t)
	ns := "cozy-cluster-api"
	e.namespace(ns)
	e.provider(ns, "capi-controller-manager", "cluster-api")
	e.provider(ns, "capi-kairos-bootstrap-controller-manager", "bootstrap-kairos")
	e.service(ns, "capi-webhook-service", map[string]any{"cluster.x-k8s.io/provider": "cluster-api"})
	bad := e.service(ns, "capi-kairos-bootstrap-webhook-service", map[string]any{"control-plane": "controller-manager"})
	e.webhookConfig("capi-validating-webhook-configuration", ns, "capi-webhook-service")
	e.webhookConfig("capi-kairos-bootstrap-validating-webhook-configuration", ns, "capi-kairos-bootstrap-webhook-service")

	ctx := testkit.Context(t, 30*time.Second)
	deps := []string{"capi-controller-manager", "capi-kairos-bootstrap-controller-manager"}
	err := WebhookSelectors(ctx, e.dyn, ns, deps)
	for _, want := range []string{
		"webhook Service cozy-cluster-api/capi-kairos-bootstrap-webhook-service selector control-plane=controller-manager selects the pods of 2 Deployments (capi-controller-manager, capi-kairos-bootstrap-controller-manager)",
		"no webhook Service in cozy-cluster-api selects only the pods of Deployment capi-kairos-bootstrap-controller-manager",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "capi-webhook-service selector") {
		t.Errorf("the core provider's own Service was blamed: %v", err)
	}

	bad.Object["spec"].(map[string]any)["selector"] = map[string]any{"cluster.x-k8s.io/provider": "bootstrap-kairos"}
	if _, err := e.dyn.Resource(gvrService).Namespace(ns).Update(ctx, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WebhookSelectors(ctx, e.dyn, ns, deps); err != nil {
		t.Fatalf("fixed selector still refused: %v", err)
	}
}

// The reported version must be the pin: a provider CR's status.installedVersion (with the
// platform's flavour suffix), a Deployment image's tag or digest, a Deployment label; a pin
// that names no version is reported as not compared rather than passed.
func TestVersionGate(t *testing.T) {
	e := newEnv(t)
	e.crds(nil, "operator.cluster.x-k8s.io.yaml")
	ns := "cozy-cluster-api"
	e.namespace(ns)
	ctx := testkit.Context(t, 30*time.Second)
	gvrCore := schema.GroupVersionResource{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Resource: "coreproviders"}
	cp := obj("operator.cluster.x-k8s.io/v1alpha2", "CoreProvider", ns, "cluster-api")
	cp.Object["spec"] = map[string]any{"version": "v1.10.1-core"}
	cp = e.create(gvrCore, cp)
	e.setStatus(gvrCore, cp, map[string]any{"installedVersion": "v1.10.1-core"})

	core, _ := catalog.Find("capi-core")
	pin := catalog.Pinned{Component: core, Pin: lane.Component{Name: "capi-core", Version: "v1.13.7"}}
	_, err := CheckVersion(ctx, e.dyn, pin)
	if err == nil || !strings.Contains(err.Error(), `CoreProvider cozy-cluster-api/cluster-api .status.installedVersion is "v1.10.1-core", the lane pins v1.13.7`) {
		t.Fatalf("an old core provider passed: %v", err)
	}
	e.setStatus(gvrCore, cp, map[string]any{"installedVersion": "v1.13.7-core"})
	res, err := CheckVersion(ctx, e.dyn, pin)
	if err != nil || !res.Checked || res.Have != "v1.13.7-core" {
		t.Fatalf("v1.13.7-core against v1.13.7: %+v %v", res, err)
	}
	e.setStatus(gvrCore, cp, map[string]any{"installedVersion": "v1.13.70"})
	if _, err := CheckVersion(ctx, e.dyn, pin); err == nil {
		t.Fatal("v1.13.70 passed as v1.13.7")
	}

	e.namespace("cozy-kamaji")
	digest := "sha256:dd81f5b76208e11665f2d2eed00396653c32182079ee53f44169074ac35d62ed"
	e.deployment("cozy-kamaji", "kamaji", "ghcr.io/cozystack/cozystack/kamaji:v1.6.2@"+digest, nil)
	kamaji, _ := catalog.Find("kamaji")
	res, err = CheckVersion(ctx, e.dyn, catalog.Pinned{Component: kamaji, Pin: lane.Component{Version: "cozystack build", Digest: digest}})
	if err != nil || !res.Checked {
		t.Fatalf("digest pin: %+v %v", res, err)
	}
	_, err = CheckVersion(ctx, e.dyn, catalog.Pinned{Component: kamaji, Pin: lane.Component{Version: "v1.6.2", Digest: "sha256:" + strings.Repeat("0", 64)}})
	if err == nil || !strings.Contains(err.Error(), "the lane pins digest sha256:000") {
		t.Fatalf("a wrong digest passed: %v", err)
	}
	res, err = CheckVersion(ctx, e.dyn, catalog.Pinned{Component: kamaji, Pin: lane.Component{Version: "cozystack build", Digest: lane.DigestUnknown}})
	if err != nil || res.Checked || !strings.Contains(res.Note, "no digest") {
		t.Fatalf("an unverifiable pin must be reported unchecked: %+v %v", res, err)
	}
}

// KubeVirt running in emulation on a lane that asked for hardware KVM ends the wait at once,
// naming the field; an Available KubeVirt without emulation passes.
func TestKubeVirtNeverEmulatesSilently(t *testing.T) {
	e := newEnv(t)
	e.crds(nil, "kubevirt.io.yaml")
	e.namespace("cozy-kubevirt")
	gvr := schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
	kv := obj("kubevirt.io/v1", "KubeVirt", "cozy-kubevirt", "kubevirt")
	kv.Object["spec"] = map[string]any{"configuration": map[string]any{
		"developerConfiguration": map[string]any{"useEmulation": true},
		"virtualMachineOptions":  map[string]any{"disableSerialConsoleLog": map[string]any{}},
	}}
	kv = e.create(gvr, kv)
	comp, _ := catalog.Find("kubevirt")
	p := catalog.Pinned{Component: comp, Pin: lane.Component{Version: "v1.8.4"}}
	start := time.Now()
	err := KubeVirtReady(testkit.Context(t, 20*time.Second), e.dyn, p, GateOptions{})
	if err == nil || !strings.Contains(err.Error(), "useEmulation is true but the lane's kind.emulation is false") || time.Since(start) > 10*time.Second {
		t.Fatalf("want a terminal error at once, got %v after %s", err, time.Since(start))
	}
	unstructured.SetNestedField(kv.Object, false, "spec", "configuration", "developerConfiguration", "useEmulation")
	kv, err = e.dyn.Resource(gvr).Namespace("cozy-kubevirt").Update(testkit.Context(t, 10*time.Second), kv, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.setStatus(gvr, kv, map[string]any{"phase": "Deployed", "observedKubeVirtVersion": "v1.8.4",
		"conditions": []any{map[string]any{"type": "Available", "status": "True", "reason": "AllComponentsReady"}}})
	var rec strings.Builder
	if err := KubeVirtReady(testkit.Context(t, 20*time.Second), e.dyn, p, GateOptions{Record: &rec}); err != nil {
		t.Fatal(err)
	}
	if res, err := CheckVersion(testkit.Context(t, 10*time.Second), e.dyn, p); err != nil || !res.Checked {
		t.Fatalf("version: %+v %v", res, err)
	}
	if !strings.Contains(rec.String(), "serial console log off by default; pools with logSerialConsole turn it on per VM") {
		t.Fatalf("serial console policy not recorded: %q", rec.String())
	}
}
