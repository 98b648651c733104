package platform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const chartVersion = "0.0.0-sim"

// refuse reports a render refusal as Flux does: Ready=False with the chart's execution error,
// the failure counted, no new history entry (the release never rendered). cozystack-api shows
// it on the app.
func (p *Platform) refuse(ctx context.Context, hr *unstructured.Unstructured, r *Refusal) error {
	action, reason := "install", "InstallFailed"
	if h, _, _ := unstructured.NestedSlice(hr.Object, "status", "history"); len(h) > 0 {
		action, reason = "upgrade", "UpgradeFailed"
	}
	msg := fmt.Sprintf("Helm %s failed for release %s/%s with chart kubernetes@%s: execution error at (kubernetes/templates/cluster.yaml): %s",
		action, hr.GetNamespace(), hr.GetName(), chartVersion, r.Error())
	attempted, _, _ := unstructured.NestedInt64(hr.Object, "status", "lastAttemptedGeneration")
	if attempted == hr.GetGeneration() && conditionStatus(hr, "Ready") == "False" && conditionMessage(hr, "Ready") == msg {
		return nil // this generation's refusal is reported; Flux retries on its interval, not at once
	}
	patch := client.MergeFrom(hr.DeepCopy())
	failures, _, _ := unstructured.NestedInt64(hr.Object, "status", "failures")
	_ = unstructured.SetNestedField(hr.Object, failures+1, "status", "failures")
	_ = unstructured.SetNestedField(hr.Object, hr.GetGeneration(), "status", "lastAttemptedGeneration")
	_ = unstructured.SetNestedField(hr.Object, hr.GetGeneration(), "status", "observedGeneration")
	_ = unstructured.SetNestedField(hr.Object, action, "status", "lastAttemptedReleaseAction")
	setCondition(hr, "Ready", "False", reason, msg)
	setCondition(hr, "Released", "False", reason, msg)
	if err := p.c.Status().Patch(ctx, hr, patch); err != nil {
		return err
	}
	fmt.Fprintf(p.o.Log, "sim platform: %s/%s refused: %s\n", hr.GetNamespace(), hr.GetName(), r.Error())
	return nil
}

// released records a successful install or upgrade of chart: a new history entry and Ready=True,
// once per generation of the release.
func (p *Platform) released(ctx context.Context, hr *unstructured.Unstructured, chart, version string) error {
	history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
	if inSync(hr) {
		return nil
	}
	action, reason := "install", "InstallSucceeded"
	if len(history) > 0 {
		action, reason = "upgrade", "UpgradeSucceeded"
	}
	now := time.Now().UTC().Format(time.RFC3339)
	// Flux records the digests of the release's values (configDigest) and of the release itself
	// (digest) with each history entry; its CRD requires both (helm-controller v1.6.2
	// config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml, status.history.items.required).
	values, _ := json.Marshal(hr.Object["spec"])
	entry := map[string]any{
		"name": hr.GetName(), "namespace": hr.GetNamespace(), "version": int64(len(history) + 1), "status": "deployed",
		"chartName": chart, "chartVersion": chartVersion, "appVersion": version, "firstDeployed": now, "lastDeployed": now,
		"configDigest": digestOf(values), "digest": digestOf([]byte(fmt.Sprintf("%s/%s.v%d %s", hr.GetNamespace(), hr.GetName(), len(history)+1, values))),
	}
	for _, h := range history {
		if m, ok := h.(map[string]any); ok && m["status"] == "deployed" {
			m["status"] = "superseded"
		}
	}
	history = append([]any{entry}, history...)
	msg := fmt.Sprintf("Helm %s succeeded for release %s/%s.v%d with chart %s@%s", action, hr.GetNamespace(), hr.GetName(), len(history), chart, chartVersion)
	patch := client.MergeFrom(hr.DeepCopy())
	_ = unstructured.SetNestedSlice(hr.Object, history, "status", "history")
	_ = unstructured.SetNestedField(hr.Object, hr.GetGeneration(), "status", "observedGeneration")
	_ = unstructured.SetNestedField(hr.Object, hr.GetGeneration(), "status", "lastAttemptedGeneration")
	_ = unstructured.SetNestedField(hr.Object, chartVersion, "status", "lastAttemptedRevision")
	_ = unstructured.SetNestedField(hr.Object, action, "status", "lastAttemptedReleaseAction")
	_ = unstructured.SetNestedField(hr.Object, int64(0), "status", "failures")
	setCondition(hr, "Ready", "True", reason, msg)
	setCondition(hr, "Released", "True", reason, msg)
	return p.c.Status().Patch(ctx, hr, patch)
}

// inSync is whether the release of hr's generation is installed: Ready, attempted at this
// generation, with a history entry. Helm then leaves the release's objects alone until the next
// generation: helm-controller compares the cluster with the release only under drift detection
// (github.com/fluxcd/helm-controller v1.6.2 internal/reconcile/state.go:191-206, MustDetectChanges),
// which is off unless spec.driftDetection.mode says otherwise (github.com/fluxcd/helm-controller/api
// v1.6.2 v2/helmrelease_types.go:334-341, DriftDetectionDisabled), and Cozystack's
// API sets no driftDetection on an app's HelmRelease (cozystack/cozystack v1.6.1
// pkg/registry/apps/application/rest.go:1591-1619).
func inSync(hr *unstructured.Unstructured) bool {
	history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
	attempted, _, _ := unstructured.NestedInt64(hr.Object, "status", "lastAttemptedGeneration")
	return conditionStatus(hr, "Ready") == "True" && attempted == hr.GetGeneration() && len(history) > 0
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

// digestOf is a Flux-style digest, sha256:<hex>.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
