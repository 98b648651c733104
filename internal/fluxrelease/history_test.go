package fluxrelease

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func release(history ...map[string]any) *unstructured.Unstructured {
	hr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
		"metadata": map[string]any{"namespace": "tenant-e2e", "name": "kubernetes-pools"}, "status": map[string]any{}}}
	if history != nil {
		h := make([]any, len(history))
		for i, e := range history {
			h[i] = e
		}
		hr.Object["status"].(map[string]any)["history"] = h
	}
	return hr
}

// Flux keeps the newest snapshot first; only failed and uninstalled entries are remediations,
// as Cozystack's guard reads them.
func TestOfFindsFailedAndUninstalledEntriesOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hr      *unstructured.Unstructured
		count   int
		empty   bool
		text    string
		lastSet bool
	}{
		{"deployed only", release(map[string]any{"version": int64(1), "status": "deployed"}), 0, false, "", false},
		{"no history", release(), 0, true, "", false},
		{"failed then deployed", release(
			map[string]any{"version": int64(2), "status": "deployed", "lastDeployed": "2026-12-03T08:02:00Z"},
			map[string]any{"version": int64(1), "status": "failed", "lastDeployed": "2026-12-03T08:00:00Z"}),
			1, false, "HelmRelease tenant-e2e/kubernetes-pools: 1 remediated (v1 failed), last at 2026-12-03T08:00:00Z", true},
		{"uninstalled and pending-rollback", release(
			map[string]any{"version": int64(3), "status": "pending-rollback"},
			map[string]any{"version": int64(2), "status": "uninstalled"},
			map[string]any{"version": int64(1), "status": "failed"}),
			2, false, "HelmRelease tenant-e2e/kubernetes-pools: 2 remediated (v1 failed, v2 uninstalled)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, empty := Of(tc.hr)
			if r.Count() != tc.count || empty != tc.empty || r.Last.IsZero() == tc.lastSet {
				t.Fatalf("got %d remediated, empty %v, last %v; want %d, %v, last set %v", r.Count(), empty, r.Last, tc.count, tc.empty, tc.lastSet)
			}
			if tc.count > 0 && r.String() != tc.text {
				t.Fatalf("got %q\nwant %q", r.String(), tc.text)
			}
			if tc.lastSet && !r.Last.Equal(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)) {
				t.Fatalf("last %v", r.Last)
			}
		})
	}
}
