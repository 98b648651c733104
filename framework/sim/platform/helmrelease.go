package platform

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const chartVersion = "0.0.0-sim"

// ensureHelmRelease keeps HelmRelease kubernetes-<name> in step with the app's spec.
func (p *Platform) ensureHelmRelease(ctx context.Context, app *unstructured.Unstructured, spec map[string]any) (*unstructured.Unstructured, error) {
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(HelmReleaseGVK)
	hr.SetNamespace(app.GetNamespace())
	hr.SetName(Release(app.GetName()))
	_, err := controllerutil.CreateOrPatch(ctx, p.c, hr, func() error {
		hr.SetLabels(merge(hr.GetLabels(), map[string]string{
			"apps.cozystack.io/application.kind": "Kubernetes", "apps.cozystack.io/application.name": app.GetName(),
		}))
		hr.Object["spec"] = map[string]any{
			"releaseName": Release(app.GetName()), "interval": "5m",
			"chart": map[string]any{"spec": map[string]any{"chart": "kubernetes", "version": chartVersion,
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": "cozystack-apps", "namespace": "cozy-public"}}},
			"install": map[string]any{"timeout": "20m", "disableWait": true},
			"upgrade": map[string]any{"timeout": "20m", "disableWait": true},
			"values":  spec,
		}
		return controllerutil.SetControllerReference(app, hr, p.c.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("platform: HelmRelease %s/%s: %w", hr.GetNamespace(), hr.GetName(), err)
	}
	return hr, nil
}

// refuse reports a render refusal as Flux does: Ready=False with the chart's execution error,
// the failure counted, no new history entry (the release never rendered); the app mirrors it.
func (p *Platform) refuse(ctx context.Context, app, hr *unstructured.Unstructured, r *Refusal) error {
	action, reason := "install", "InstallFailed"
	if h, _, _ := unstructured.NestedSlice(hr.Object, "status", "history"); len(h) > 0 {
		action, reason = "upgrade", "UpgradeFailed"
	}
	msg := fmt.Sprintf("Helm %s failed for release %s/%s with chart kubernetes@%s: execution error at (kubernetes/templates/cluster.yaml): %s",
		action, hr.GetNamespace(), hr.GetName(), chartVersion, r.Error())
	patch := client.MergeFrom(hr.DeepCopy())
	failures, _, _ := unstructured.NestedInt64(hr.Object, "status", "failures")
	_ = unstructured.SetNestedField(hr.Object, failures+1, "status", "failures")
	_ = unstructured.SetNestedField(hr.Object, hr.GetGeneration(), "status", "lastAttemptedGeneration")
	_ = unstructured.SetNestedField(hr.Object, action, "status", "lastAttemptedReleaseAction")
	setCondition(hr, "Ready", "False", reason, msg)
	setCondition(hr, "Released", "False", reason, msg)
	if err := p.c.Status().Patch(ctx, hr, patch); err != nil {
		return err
	}
	fmt.Fprintf(p.o.Log, "sim platform: %s/%s refused: %s\n", app.GetNamespace(), app.GetName(), r.Error())
	return p.mirror(ctx, app, "False", reason, msg, "")
}

// released records a successful install or upgrade: a new history entry and Ready=True.
func (p *Platform) released(ctx context.Context, app, hr *unstructured.Unstructured, version string) error {
	history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
	observed, _, _ := unstructured.NestedInt64(hr.Object, "status", "observedGeneration")
	ready := conditionStatus(hr, "Ready") == "True"
	if ready && observed == hr.GetGeneration() && len(history) > 0 {
		if conditionStatus(app, "Ready") == "True" {
			return nil
		}
		c := condition(hr, "Ready")
		return p.mirror(ctx, app, "True", c["reason"], c["message"], version)
	}
	action, reason := "install", "InstallSucceeded"
	if len(history) > 0 {
		action, reason = "upgrade", "UpgradeSucceeded"
	}
	now := time.Now().UTC().Format(time.RFC3339)
	entry := map[string]any{
		"name": hr.GetName(), "namespace": hr.GetNamespace(), "version": int64(len(history) + 1), "status": "deployed",
		"chartName": "kubernetes", "chartVersion": chartVersion, "appVersion": version, "firstDeployed": now, "lastDeployed": now,
	}
	for _, h := range history {
		if m, ok := h.(map[string]any); ok && m["status"] == "deployed" {
			m["status"] = "superseded"
		}
	}
	history = append([]any{entry}, history...)
	msg := fmt.Sprintf("Helm %s succeeded for release %s/%s.v%d with chart kubernetes@%s", action, hr.GetNamespace(), hr.GetName(), len(history), chartVersion)
	patch := client.MergeFrom(hr.DeepCopy())
	_ = unstructured.SetNestedSlice(hr.Object, history, "status", "history")
	_ = unstructured.SetNestedField(hr.Object, hr.GetGeneration(), "status", "observedGeneration")
	_ = unstructured.SetNestedField(hr.Object, hr.GetGeneration(), "status", "lastAttemptedGeneration")
	_ = unstructured.SetNestedField(hr.Object, action, "status", "lastAttemptedReleaseAction")
	_ = unstructured.SetNestedField(hr.Object, int64(0), "status", "failures")
	setCondition(hr, "Ready", "True", reason, msg)
	setCondition(hr, "Released", "True", reason, msg)
	if err := p.c.Status().Patch(ctx, hr, patch); err != nil {
		return err
	}
	return p.mirror(ctx, app, "True", reason, msg, version)
}

// mirror copies the HelmRelease's verdict into the app's status, as cozystack-api shows it.
func (p *Platform) mirror(ctx context.Context, app *unstructured.Unstructured, status, reason, msg, version string) error {
	if conditionStatus(app, "Ready") == status && conditionMessage(app, "Ready") == msg && msg != "" {
		return nil
	}
	patch := client.MergeFrom(app.DeepCopy())
	setCondition(app, "Ready", status, reason, msg)
	if version != "" {
		_ = unstructured.SetNestedField(app.Object, version, "status", "version")
	}
	_ = unstructured.SetNestedField(app.Object, app.GetGeneration(), "status", "observedGeneration")
	return p.c.Status().Patch(ctx, app, patch)
}

// setCondition sets condition typ on u's status.conditions, keeping its transition time when
// the status does not change.
func setCondition(u *unstructured.Unstructured, typ, status, reason, msg string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	now := time.Now().UTC().Format(time.RFC3339)
	c := map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": now}
	for i, x := range conds {
		m, ok := x.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		if m["status"] == status {
			c["lastTransitionTime"] = m["lastTransitionTime"]
		}
		conds[i] = c
		_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
		return
	}
	_ = unstructured.SetNestedSlice(u.Object, append(conds, c), "status", "conditions")
}

func conditionStatus(u *unstructured.Unstructured, typ string) string {
	return condition(u, typ)["status"]
}
func conditionMessage(u *unstructured.Unstructured, typ string) string {
	return condition(u, typ)["message"]
}

func condition(u *unstructured.Unstructured, typ string) map[string]string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		if m, ok := x.(map[string]any); ok && m["type"] == typ {
			out := map[string]string{}
			for k, v := range m {
				out[k] = fmt.Sprint(v)
			}
			return out
		}
	}
	return map[string]string{}
}
