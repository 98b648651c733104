package install

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-e2e/internal/testkit"
)

func (e *env) helmRelease(ns, name string) *unstructured.Unstructured {
	e.t.Helper()
	hr := obj("helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, name)
	hr.Object["spec"] = map[string]any{"chart": map[string]any{"spec": map[string]any{"chart": name}}}
	return e.create(gvrHelmRelease, hr)
}

func hrStatus(ready, reason, message string, history ...string) map[string]any {
	var h []any
	for i, st := range history {
		h = append(h, map[string]any{"name": "r", "namespace": "ns", "version": int64(len(history) - i), "status": st, "chartVersion": "0.0.0"})
	}
	return map[string]any{
		"conditions": []any{map[string]any{"type": "Ready", "status": ready, "reason": reason, "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}},
		"history":    h,
	}
}

// The platform gate, against HelmReleases, NodeGroupClasses and APIServices on a real
// apiserver: a non-Ready release is printed with its own message; a release Ready now but
// remediated once is reported by its history, or fails the gate under policy fail; the
// built-in classes and the platform APIs must be there; then the gate passes.
func TestPlatformGate(t *testing.T) {
	e := newEnv(t)
	e.crds([]string{"helmreleases.helm.toolkit.fluxcd.io", "nodegroupclasses.cozystack.io"}, "packages.cozystack.io.yaml")
	for _, ns := range []string{"cozy-kamaji", "tenant-root"} {
		e.namespace(ns)
	}
	// The operator has created every Package's HelmReleases.
	pkg := obj("cozystack.io/v1alpha1", "Package", "", "cozystack.kamaji")
	pkg.Object["spec"] = map[string]any{"variant": "default"}
	e.setStatus(gvrPackage, e.create(gvrPackage, pkg), map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "reconciliation succeeded, generated 1 helmrelease(s)"}}})
	kamaji := e.setStatus(gvrHelmRelease, e.helmRelease("cozy-kamaji", "kamaji"), hrStatus("True", "InstallSucceeded", "Helm install succeeded", "deployed"))
	etcd := e.helmRelease("tenant-root", "etcd")
	e.setStatus(gvrHelmRelease, etcd, hrStatus("False", "InstallFailed", "Helm install failed for release tenant-root/etcd: context deadline exceeded", "failed"))

	err := PlatformGate(testkit.Context(t, 2*time.Second), e.dyn, GateOptions{})
	for _, want := range []string{
		"1 of 2 HelmReleases not Ready on a fresh listing",
		`HelmRelease tenant-root/etcd Ready="False" (InstallFailed): Helm install failed for release tenant-root/etcd: context deadline exceeded`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "cozy-kamaji/kamaji") {
		t.Errorf("a Ready release was blamed: %v", err)
	}

	// Ready now, but the history says the install failed once: under the lane policy "fail"
	// the gate names it; under "report" (the default, as Cozystack's own install gate
	// requires only Ready) it passes this step and tells the summary which release, how many
	// times and when.
	st := hrStatus("True", "UpgradeSucceeded", "Helm upgrade succeeded", "deployed", "failed")
	h := st["history"].([]any)
	h[1].(map[string]any)["lastDeployed"] = "2026-01-01T10:02:03Z"
	e.setStatus(gvrHelmRelease, etcd, st)
	err = PlatformGate(testkit.Context(t, 10*time.Second), e.dyn, GateOptions{Remediation: "fail"})
	if err == nil || !strings.Contains(err.Error(), "HelmRelease tenant-root/etcd: 1 remediated (v1 failed), last at 2026-01-01T10:02:03Z") {
		t.Fatalf("remediation under policy fail: %v", err)
	}
	var notes []string
	var rec strings.Builder
	err = PlatformGate(testkit.Context(t, 2*time.Second), e.dyn, GateOptions{Record: &rec, Note: func(n string) { notes = append(notes, n) }})
	if err == nil || strings.Contains(err.Error(), "remediat") {
		t.Fatalf("under policy report the gate stopped at the remediation: %v", err)
	}
	if len(notes) != 1 || notes[0] != "install-time remediations: 1 in 1 HelmReleases: tenant-root/etcd 1 (last 2026-01-01T10:02:03Z)" {
		t.Fatalf("summary note: %q", notes)
	}
	if !strings.Contains(rec.String(), "remediated               HelmRelease tenant-root/etcd: 1 remediated (v1 failed)") {
		t.Fatalf("gates.txt: %q", rec.String())
	}
	e.setStatus(gvrHelmRelease, kamaji, hrStatus("True", "InstallSucceeded", "ok", "deployed", "superseded"))

	err = PlatformGate(testkit.Context(t, 2*time.Second), e.dyn, GateOptions{})
	if err == nil || !strings.Contains(err.Error(), "built-in NodeGroupClasses (talos, kairos): stuck") || !strings.Contains(err.Error(), "missing talos, kairos") {
		t.Fatalf("missing classes not named: %v", err)
	}
	for _, os := range []string{"talos", "kairos"} {
		c := obj("cozystack.io/v1alpha1", "NodeGroupClass", "", os)
		c.Object["spec"] = map[string]any{"os": os}
		e.create(gvrNodeClass, c)
	}
	for _, name := range platformAPIServices() {
		group, version := strings.TrimPrefix(name, "v1alpha1."), "v1alpha1"
		s := obj("apiregistration.k8s.io/v1", "APIService", "", name)
		// No service: the aggregator serves it locally and reports it Available.
		s.Object["spec"] = map[string]any{"group": group, "version": version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15)}
		e.create(gvrAPIService, s)
	}
	var passed strings.Builder
	if err := PlatformGate(testkit.Context(t, 30*time.Second), e.dyn, GateOptions{Record: &passed}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(passed.String(), "2 HelmReleases Ready;") {
		t.Fatalf("record: %q", passed.String())
	}
}
