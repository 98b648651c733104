package cozyapi

import (
	"context"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// toApp is the app a HelmRelease shows (rest.go:1340-1470): its name without the release prefix,
// the release's uid and resourceVersion, no generation, the prefixed labels and annotations
// unprefixed, spec = the values without internal keys, status = version, the Ready and Released
// conditions, and a Tenant's namespace.
func (s *Server) toApp(_ context.Context, hr *unstructured.Unstructured, k Kind) *unstructured.Unstructured {
	app := &unstructured.Unstructured{Object: map[string]any{}}
	app.SetAPIVersion(Group + "/" + Version)
	app.SetKind(k.Kind)
	app.SetName(strings.TrimPrefix(hr.GetName(), k.Prefix))
	app.SetNamespace(hr.GetNamespace())
	app.SetUID(hr.GetUID())
	app.SetResourceVersion(hr.GetResourceVersion())
	app.SetCreationTimestamp(hr.GetCreationTimestamp())
	app.SetDeletionTimestamp(hr.GetDeletionTimestamp())
	if l := unprefixed(hr.GetLabels(), LabelPrefix); len(l) > 0 {
		app.SetLabels(l)
	}
	if a := unprefixed(hr.GetAnnotations(), AnnotationPrefix); len(a) > 0 {
		app.SetAnnotations(a)
	}
	values, _, _ := unstructured.NestedMap(hr.Object, "spec", "values")
	spec := map[string]any{}
	for key, v := range values {
		if !strings.HasPrefix(key, "_") {
			spec[key] = v
		}
	}
	app.Object["spec"] = spec
	status := map[string]any{}
	if v, _, _ := unstructured.NestedString(hr.Object, "status", "lastAttemptedRevision"); v != "" {
		status["version"] = v
	}
	conds, _, _ := unstructured.NestedSlice(hr.Object, "status", "conditions")
	var kept []any
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m == nil || (m["type"] != "Ready" && m["type"] != "Released") {
			continue
		}
		kept = append(kept, map[string]any{"type": m["type"], "status": m["status"], "reason": m["reason"], "message": m["message"],
			"lastTransitionTime": m["lastTransitionTime"]})
	}
	if len(kept) > 0 {
		status["conditions"] = kept
	}
	if k.Kind == "Tenant" {
		status["namespace"] = tenantNamespace(hr.GetNamespace(), app.GetName())
	}
	app.Object["status"] = status
	return app
}

// tenantNamespace is the namespace a Tenant app makes (rest.go:1777-1793): tenant-<name> under
// tenant-root, <parent namespace>-<name> under any other tenant.
func tenantNamespace(parent, name string) string {
	if parent == "tenant-root" {
		return "tenant-" + name
	}
	return parent + "-" + name
}

// toRelease is the HelmRelease of app (rest.go:1551-1650): on top of the live one when updating,
// so what the platform keeps there (status, its own labels) stays.
func toRelease(app *unstructured.Unstructured, k Kind, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	hr := &unstructured.Unstructured{Object: map[string]any{}}
	if live != nil {
		hr = live.DeepCopy()
	}
	hr.SetAPIVersion("helm.toolkit.fluxcd.io/v2")
	hr.SetKind("HelmRelease")
	hr.SetName(k.Prefix + app.GetName())
	hr.SetNamespace(app.GetNamespace())
	if rv := app.GetResourceVersion(); rv != "" {
		hr.SetResourceVersion(rv)
	}
	labels := map[string]string{}
	for key, v := range hr.GetLabels() {
		if !strings.HasPrefix(key, LabelPrefix) {
			labels[key] = v
		}
	}
	for key, v := range app.GetLabels() {
		labels[LabelPrefix+key] = v
	}
	labels[LabelKind], labels[LabelGroup], labels[LabelName] = k.Kind, Group, app.GetName()
	labels["sharding.fluxcd.io/key"] = "tenants"
	if _, set := labels[simenv.RendererLabel]; !set && k.Kind == "Kubernetes" {
		labels[simenv.RendererLabel] = renderer(app)
	}
	hr.SetLabels(labels)
	annotations := map[string]string{}
	for key, v := range hr.GetAnnotations() {
		if !strings.HasPrefix(key, AnnotationPrefix) {
			annotations[key] = v
		}
	}
	for key, v := range app.GetAnnotations() {
		annotations[AnnotationPrefix+key] = v
	}
	if len(annotations) > 0 {
		hr.SetAnnotations(annotations)
	}
	spec, _, _ := unstructured.NestedMap(app.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	install := map[string]any{"timeout": "20m", "strategy": map[string]any{"name": "RetryOnFailure", "retryInterval": "1m"}}
	upgrade := map[string]any{"timeout": "20m", "strategy": map[string]any{"name": "RetryOnFailure", "retryInterval": "1m"}}
	if k.DisableWait {
		install["disableWait"], upgrade["disableWait"] = true, true
	}
	hr.Object["spec"] = map[string]any{
		"chartRef":   k.ChartRef,
		"interval":   "5m",
		"install":    install,
		"upgrade":    upgrade,
		"valuesFrom": []any{map[string]any{"kind": "Secret", "name": "cozystack-values"}},
		"values":     spec,
	}
	return hr, nil
}

// postRender sets the Server's post-renderers on hr, the HelmRelease of an app, when the real
// chart renders it (simenv.RendererChart).
func (s *Server) postRender(hr *unstructured.Unstructured) {
	if len(s.PostRenderers) == 0 || hr.GetLabels()[simenv.RendererLabel] != simenv.RendererChart {
		return
	}
	hr.Object["spec"].(map[string]any)["postRenderers"] = s.PostRenderers
}

// renderer says which renders a Kubernetes app in the sim (simenv.RendererLabel): the real chart
// when every pool runs Talos (no class, or the built-in talos), the #4911 model otherwise.
func renderer(app *unstructured.Unstructured) string {
	groups, _, _ := unstructured.NestedMap(app.Object, "spec", "nodeGroups")
	for _, g := range groups {
		spec, _ := g.(map[string]any)
		if class, _ := spec["nodeGroupClassName"].(string); class != "" && class != "talos" {
			return simenv.RendererModel
		}
	}
	return simenv.RendererChart
}

// rendererText says in words what renderer r is.
func rendererText(r string) string {
	switch r {
	case simenv.RendererChart:
		return "the real Cozystack Kubernetes chart through helm-controller (its pools all run Talos)"
	case simenv.RendererModel:
		return "the sim's model of cozystack/cozystack#4911 (a pool on a class other than talos)"
	}
	return r
}

func unprefixed(in map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}

func mergePatch(doc, patch []byte) ([]byte, error) { return jsonpatch.MergePatch(doc, patch) }
